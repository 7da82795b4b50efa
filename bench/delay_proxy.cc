#include "bench/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kad_bench {
namespace {

using Clock = std::chrono::steady_clock;

void no_delay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A listening socket on a free loopback port; its port goes to `port`.
absl::StatusOr<int> listen_loopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on loopback: ", strerror(errno)));
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  no_delay(fd);
  return fd;
}

// One direction of a proxied connection: bytes read from `from` are written
// to `to` no sooner than `delay` after they arrived.
class DelayLine {
 public:
  DelayLine(int from, int to, Clock::duration delay) : from_(from), to_(to), delay_(delay) {}
  void run() {
    std::thread writer([this] { write_out(); });
    std::vector<char> buffer(1 << 16);
    for (;;) {
      const ssize_t n = read(from_, buffer.data(), buffer.size());
      std::lock_guard lock(mu_);
      if (n <= 0) {
        ended_ = true;
        ready_.notify_one();
        break;
      }
      pending_.push_back(
          {Clock::now() + delay_, std::string(buffer.data(), static_cast<size_t>(n))});
      ready_.notify_one();
    }
    writer.join();
    shutdown(to_, SHUT_WR);
  }

 private:
  void write_out() {
    for (;;) {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [&] { return ended_ || !pending_.empty(); });
      if (pending_.empty()) return;
      auto [due, bytes] = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      std::this_thread::sleep_until(due);
      for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = send(to_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n <= 0) return;
        done += static_cast<size_t>(n);
      }
    }
  }
  const int from_, to_;
  const Clock::duration delay_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::pair<Clock::time_point, std::string>> pending_;
  bool ended_ = false;
};

// Accepts connections on `listener` for the process's life, each served by
// `serve` (which closes it) on a thread of its own.
template <typename Serve>
void serve_each(int listener, Serve serve) {
  std::thread([listener, serve] {
    for (;;) {
      const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      no_delay(c);
      std::thread(serve, c).detach();
    }
  }).detach();
}

}  // namespace

absl::StatusOr<DelayProxy*> DelayProxy::start(int upstream_port, absl::Duration one_way) {
  auto* proxy = new DelayProxy();  // serves until the process exits
  absl::StatusOr<int> listener = listen_loopback(&proxy->port_);
  if (!listener.ok()) return listener.status();
  const Clock::duration delay = absl::ToChronoNanoseconds(one_way);
  serve_each(*listener, [upstream_port, delay](int client) {
    const int server = connect_loopback(upstream_port);
    if (server >= 0) {
      DelayLine up(client, server, delay), down(server, client, delay);
      std::thread back([&] { down.run(); });
      up.run();
      back.join();
      close(server);
    }
    close(client);
  });
  return proxy;
}

absl::StatusOr<int> start_tcp_echo() {
  int port = 0;
  absl::StatusOr<int> listener = listen_loopback(&port);
  if (!listener.ok()) return listener.status();
  serve_each(*listener, [](int c) {
    char buffer[4096];
    for (ssize_t n; (n = read(c, buffer, sizeof(buffer))) > 0;)
      if (send(c, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    close(c);
  });
  return port;
}

absl::StatusOr<int> start_tcp_sink() {
  int port = 0;
  absl::StatusOr<int> listener = listen_loopback(&port);
  if (!listener.ok()) return listener.status();
  serve_each(*listener, [](int c) {
    uint64_t want = 0;
    std::vector<char> buffer(1 << 20);
    if (read(c, &want, sizeof(want)) == sizeof(want)) {
      for (ssize_t n; want > 0 && (n = read(c, buffer.data(), buffer.size())) > 0;)
        want -= std::min<uint64_t>(want, static_cast<uint64_t>(n));
      const char done = 1;
      (void)!send(c, &done, 1, MSG_NOSIGNAL);
    }
    close(c);
  });
  return port;
}

absl::StatusOr<double> tcp_send_seconds(int port, const std::string& data, uint64_t bytes) {
  const int fd = connect_loopback(port);
  if (fd < 0) return absl::UnavailableError("cannot connect to the sink");
  const auto start = Clock::now();
  bool ok = send(fd, &bytes, sizeof(bytes), MSG_NOSIGNAL) == sizeof(bytes);
  for (uint64_t sent = 0; ok && sent < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(data.size(), bytes - sent));
    const ssize_t w = send(fd, data.data(), n, MSG_NOSIGNAL);
    ok = w > 0;
    if (ok) sent += static_cast<uint64_t>(w);
  }
  char done = 0;
  ok = ok && read(fd, &done, 1) == 1;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  close(fd);
  if (!ok) return absl::UnavailableError("the sink connection broke");
  return seconds;
}

absl::StatusOr<absl::Duration> tcp_round_trip(int port, int n) {
  const int fd = connect_loopback(port);
  if (fd < 0) return absl::UnavailableError("cannot connect to the echo server");
  std::vector<absl::Duration> times;
  char byte = 'k';
  for (int i = 0; i < n; ++i) {
    const absl::Time start = absl::Now();
    if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1 || read(fd, &byte, 1) != 1) {
      close(fd);
      return absl::UnavailableError("the echo connection broke");
    }
    times.push_back(absl::Now() - start);
  }
  close(fd);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace kad_bench
