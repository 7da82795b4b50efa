#include "server/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kad::server {

absl::StatusOr<int> create_sealed_memfd(const char* name, uint64_t bytes) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot create shared memory `%s`: %s", name, std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot size shared memory `%s` to %d bytes: %s", name, bytes, std::strerror(error)));
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    close(fd);
    return absl::InternalError(
        absl::StrFormat("cannot seal shared memory `%s`: %s", name, std::strerror(error)));
  }
  return fd;
}

absl::StatusOr<SharedMapping> SharedMapping::create(const char* name, uint64_t bytes) {
  absl::StatusOr<int> fd = create_sealed_memfd(name, bytes);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<SharedMapping> m = map(*fd, bytes, name);
  if (m.ok()) m->made_ = true;
  return m;
}

absl::StatusOr<SharedMapping> SharedMapping::map(int fd, uint64_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot map %s: %s", what, std::strerror(error)));
  }
  return SharedMapping(fd, p, bytes);
}

void release_memfd_memory(int fd, uint64_t bytes) {
  if (fd < 0 || bytes == 0) return;
  // Best effort: the memory is freed with the last mapping in any case.
  (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
}

SharedMapping::~SharedMapping() {
  if (made_) release_memfd_memory(fd_, bytes_);
  if (data_ != nullptr) munmap(data_, bytes_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace kad::server
