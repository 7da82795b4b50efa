// SharedMapping: the memory kad shares with a worker as a memfd. The maker's
// mapping frees the memory when it goes (kad lets go of it); a mapping of a
// memfd made elsewhere (a worker's of kad's channel, ring or page) leaves it
// to the others who still use it.
#include <fcntl.h>

#include <cstring>
#include <optional>

#include "gtest/gtest.h"
#include "server/sealed_memfd.h"

namespace kad::server {
namespace {

constexpr uint64_t kBytes = 64 * 1024;

TEST(SharedMapping, AMappingOfAnotherProcesssMemfdLeavesItsBytesWhenItGoes) {
  absl::StatusOr<SharedMapping> made = SharedMapping::create("shared-mapping-test", kBytes);
  ASSERT_TRUE(made.ok()) << made.status();
  std::memset(made->data(), 0x5a, kBytes);
  {
    absl::StatusOr<SharedMapping> lent =
        SharedMapping::map(fcntl(made->fd(), F_DUPFD_CLOEXEC, 0), kBytes, "a lent copy");
    ASSERT_TRUE(lent.ok()) << lent.status();
    EXPECT_EQ(static_cast<unsigned char*>(lent->data())[kBytes - 1], 0x5a);
  }
  const auto* bytes = static_cast<const unsigned char*>(made->data());
  for (uint64_t i = 0; i < kBytes; i += 4096) ASSERT_EQ(bytes[i], 0x5a) << i;
}

TEST(SharedMapping, TheMakersMappingFreesTheMemoryForEveryMappingWhenItGoes) {
  std::optional<SharedMapping> made;
  {
    absl::StatusOr<SharedMapping> m = SharedMapping::create("shared-mapping-test", kBytes);
    ASSERT_TRUE(m.ok()) << m.status();
    made.emplace(*std::move(m));
  }
  std::memset(made->data(), 0x5a, kBytes);
  absl::StatusOr<SharedMapping> kept =
      SharedMapping::map(fcntl(made->fd(), F_DUPFD_CLOEXEC, 0), kBytes, "a kept copy");
  ASSERT_TRUE(kept.ok()) << kept.status();
  made.reset();
  // Still mapped, the size kept: zeros, no fault.
  const auto* bytes = static_cast<const unsigned char*>(kept->data());
  for (uint64_t i = 0; i < kBytes; i += 4096) ASSERT_EQ(bytes[i], 0) << i;
}

}  // namespace
}  // namespace kad::server
