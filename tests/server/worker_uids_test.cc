// Under a root kad each worker runs as a uid of its own (worker_uids.h):
// no two live workers share one, a uid comes back into use as late as it
// can, and a range all in use is an error naming it.
#include "server/worker/worker_uids.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kad {
namespace {

using server::worker::WorkerUid;
using server::worker::WorkerUids;

TEST(WorkerUids, LiveWorkersNeverShareAUidAndAFullRangeIsAnErrorNamingIt) {
  auto uids = WorkerUids::create(5000, 3);
  std::vector<WorkerUid> taken;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<WorkerUid> uid = uids->take();
    ASSERT_TRUE(uid.ok()) << uid.status();
    EXPECT_EQ(uid->uid(), static_cast<uid_t>(5000 + i));
    taken.push_back(*std::move(uid));
  }
  EXPECT_EQ(uids->in_use(), 3u);
  absl::StatusOr<WorkerUid> none = uids->take();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(none.status().message()),
              ::testing::HasSubstr("worker uids from 5000 to 5002 is in use"));

  // One handed back (its worker reaped) is the only one to take.
  taken.erase(taken.begin() + 1);
  EXPECT_EQ(uids->in_use(), 2u);
  absl::StatusOr<WorkerUid> again = uids->take();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->uid(), 5001u);
}

TEST(WorkerUids, AUidComesBackIntoUseAsLateAsItCan) {
  auto uids = WorkerUids::create(7000, 4);
  {
    absl::StatusOr<WorkerUid> first = uids->take();
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->uid(), 7000u);
  }  // handed back at once
  EXPECT_EQ(uids->in_use(), 0u);
  std::vector<uid_t> next;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<WorkerUid> uid = uids->take();
    ASSERT_TRUE(uid.ok());
    next.push_back(uid->uid());
  }
  EXPECT_THAT(next, ::testing::ElementsAre(7001u, 7002u, 7003u, 7000u));
}

TEST(WorkerUids, AMovedUidIsHandedBackOnce) {
  auto uids = WorkerUids::create(9000, 2);
  absl::StatusOr<WorkerUid> a = uids->take();
  ASSERT_TRUE(a.ok());
  WorkerUid held = *std::move(a);
  WorkerUid moved = std::move(held);
  EXPECT_EQ(held.uid(), 0u);
  EXPECT_EQ(moved.uid(), 9000u);
  EXPECT_EQ(uids->in_use(), 1u);
  moved = WorkerUid();
  EXPECT_EQ(uids->in_use(), 0u);
}

// kad checks at start that no user or group of the machine has a workers'
// uid: a worker would otherwise be that user to the kernel.
TEST(WorkerUids, KadChecksThatNoUserOrGroupHasAWorkersUid) {
  EXPECT_TRUE(server::worker::check_uids_unused(server::worker::kDefaultWorkerUidBase,
                                                server::worker::kWorkerUidCount)
                  .ok());
  // Debian's nobody (65534) and nogroup.
  absl::Status nobody = server::worker::check_uids_unused(65530, 10);
  EXPECT_EQ(nobody.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(nobody.message()),
              ::testing::HasSubstr("has id 65534, within the workers' uids 65530 to 65539"));
  // A group counts too: Debian's utmp (43) is no user's id.
  absl::Status utmp = server::worker::check_uids_unused(43, 1);
  EXPECT_EQ(utmp.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(utmp.message()), ::testing::HasSubstr("group utmp has id 43"));
}

// kad checks at start that a worker's uid may run its executable (a kad
// built in a folder only root may enter could not start a worker as it).
TEST(WorkerUids, KadChecksThatAWorkersUidMayRunItsExecutable) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to become another uid";
  EXPECT_TRUE(server::worker::check_uid_may_run(0x7A00FFF1, "/bin/sh").ok());
  char folder[] = "/tmp/kad-private-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);  // 0700, root's
  const std::string inside = absl::StrCat(folder, "/kad");
  ASSERT_EQ(symlink("/bin/sh", inside.c_str()), 0);
  absl::Status refused = server::worker::check_uid_may_run(0x7A00FFF1, inside);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()),
              ::testing::HasSubstr(absl::StrCat("uid ", 0x7A00FFF1, " cannot execute ", inside,
                                                ": Permission denied")));
  unlink(inside.c_str());
  rmdir(folder);
}

}  // namespace
}  // namespace kad
