// kad accepts on its UNIX sockets itself (DESIGN §8): gRPC does not tell a
// service who its UNIX peer is, and a peer's uid (SO_PEERCRED) is its
// identity there. Each connection accepted is handed to the gRPC server
// (AddInsecureChannelFromFd), whose calls then name it by the peer string
// "fd:N"; PeerCredentials answers the uid for that string.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kad::server {

// The uid of every connection accepted and not yet closed, by descriptor.
class PeerCredentials {
 public:
  void note(int fd, uint32_t uid);
  // The uid behind gRPC's peer string "fd:N"; none for any other peer.
  std::optional<uint32_t> uid_of(const std::string& peer) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, uint32_t> by_fd_ ABSL_GUARDED_BY(mu_);
};

class UnixAcceptor {
 public:
  // Listens on `path` (a socket file the caller has prepared the way for:
  // no file there) with the process's umask, and hands every connection to
  // `server`, which must be started and outlive the acceptor.
  static absl::StatusOr<std::unique_ptr<UnixAcceptor>> start(grpc::Server& server,
                                                             const std::string& path,
                                                             PeerCredentials& credentials);
  ~UnixAcceptor();  // stops accepting; connections accepted stay with gRPC

 private:
  UnixAcceptor(grpc::Server& server, PeerCredentials& credentials, int listener, int wake)
      : server_(server), credentials_(credentials), listener_(listener), wake_(wake) {}
  void run();

  grpc::Server& server_;
  PeerCredentials& credentials_;
  int listener_;
  int wake_;  // an eventfd that ends run()
  std::thread thread_;
};

}  // namespace kad::server
