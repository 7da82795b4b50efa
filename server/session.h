// One connected client's objects: its own handle tables, so that no request
// can name another session's buffer, module, kernel, queue or event.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/backend.h"
#include "core/kernel.h"
#include "core/module.h"
#include "server/channel_loans.h"
#include "server/tenants.h"
#include "server/worker/isolated_device.h"

namespace kad::server {

// Memory shared with the client: a memfd mapped into kad (and, on request,
// into the client) that a host-visible device computes on directly.
struct HostMemory {
  int fd = -1;
  void* data = nullptr;
  uint64_t bytes = 0;
  ~HostMemory();
};

struct SessionBuffer {
  // Declared first so that it is destroyed last: the device buffer over it goes first.
  std::unique_ptr<HostMemory> host;
  std::unique_ptr<Buffer> buffer;
  Device* device = nullptr;
  Charge memory;       // of its tenant's device memory on its device
  Charge host_memory;  // of the daemon's own host memory, for a zero-copy buffer
};

// A queue and the launches submitted to it and not yet known complete.
struct SessionQueue {
  // The session's own device when the queue is on one: a wait outside the
  // session's lock keeps it alive. Declared first, so that it goes last.
  std::shared_ptr<worker::IsolatedDevice> owner;
  // Of the daemon's host memory, for a scheduled queue's rings; given back
  // after the queue goes.
  Charge host_memory;
  // Its tenant's launches in flight (null without a tenant). Declared before
  // `queue`, as are the events below: the queue's scheduler gives launches
  // back (release_launches) until the queue goes.
  std::shared_ptr<Budget> launches_in_flight;
  std::atomic<EventId> last_event{0};   // the newest launch's event, counted against the tenant
  std::atomic<EventId> last_waited{0};  // the newest event a wait returned for
  std::atomic<EventId> released{0};     // the newest event given back to the tenant
  std::unique_ptr<Queue> queue;
  Device* device = nullptr;
  size_t device_index = 0;
  bool isolated = false;  // on a session's own worker: a close ends it rather than waiting for it

  // Counts the queue's launches up to `event` against its tenant. One
  // writer (the session's lock): the budget is counted before the event is
  // published, so that a release never gives back what was not counted.
  void count_launches(EventId event) {
    const EventId before = last_event.load();
    if (event <= before) return;
    if (launches_in_flight) launches_in_flight->add(event - before);
    last_event.store(event);
  }
  // The queue's launches up to `event` ended (a wait saw them, or its
  // scheduler did): gives back to the tenant those counted and not yet given
  // back. A client that never waits thus holds only what is still in kad or
  // on the device. Any thread; allocates nothing.
  void release_launches(EventId event) {
    event = std::min(event, last_event.load());
    EventId seen = released.load();
    while (event > seen && !released.compare_exchange_weak(seen, event)) {
    }
    if (event > seen && launches_in_flight) launches_in_flight->give_back(event - seen);
  }
};

// One of a bounded number of things a session holds open (a Submit stream,
// a shared-memory channel), given back when the slot goes. It counts against
// the session's own limit and its tenant's quota.
class SessionSlot {
 public:
  // A slot of `count`, or RESOURCE_EXHAUSTED naming `what` and `limit`, or
  // the tenant's quota.
  static absl::StatusOr<SessionSlot> take(std::atomic<uint32_t>& count, uint32_t limit,
                                          absl::string_view what, absl::string_view flag,
                                          const Tenant* tenant, Quota quota) {
    if (count.fetch_add(1) >= limit) {
      count.fetch_sub(1);
      return absl::ResourceExhaustedError(absl::StrCat("the session already has ", limit, " ", what,
                                                       " open, its maximum (", flag, ")"));
    }
    SessionSlot slot(&count);
    if (tenant != nullptr) {
      absl::StatusOr<Charge> charge = tenant->charge(quota, 1);
      if (!charge.ok()) return charge.status();
      slot.charge_ = *std::move(charge);
    }
    return slot;
  }
  SessionSlot(SessionSlot&& other) noexcept
      : count_(std::exchange(other.count_, nullptr)), charge_(std::move(other.charge_)) {}
  SessionSlot& operator=(SessionSlot&& other) noexcept {
    release();
    count_ = std::exchange(other.count_, nullptr);
    charge_ = std::move(other.charge_);
    return *this;
  }
  ~SessionSlot() { release(); }

 private:
  explicit SessionSlot(std::atomic<uint32_t>* count) : count_(count) {}
  void release() {
    if (count_ != nullptr) count_->fetch_sub(1);
    count_ = nullptr;
    charge_ = Charge();
  }
  std::atomic<uint32_t>* count_;
  Charge charge_;
};

class Session {
 public:
  Session(std::string id, uint64_t serial, std::string client_name, std::string peer,
          std::shared_ptr<Tenant> tenant = nullptr)
      : id_(std::move(id)),
        serial_(serial),
        client_name_(std::move(client_name)),
        peer_(std::move(peer)),
        tenant_(std::move(tenant)) {}

  // The session's credential: never logged (DESIGN §8). Logs name a session
  // by log_name() instead.
  const std::string& id() const { return id_; }
  // "session 12 (client name)": the 12th session this daemon opened.
  std::string log_name() const {
    return absl::StrCat("session ", serial_, " (", client_name_, ")");
  }
  const std::string& client_name() const { return client_name_; }
  const std::string& peer() const { return peer_; }
  // The tenant its caller is (tenants.h); null for a session the engine
  // made without one (tests that drive the engine directly).
  Tenant* tenant() const { return tenant_.get(); }
  // The uid of the process that opened it, where kad knows it (a UNIX
  // socket's peer): a shared-memory handshake for the session must come
  // from that uid (or root), so that its id alone, leaked, opens nothing.
  std::optional<uint32_t> opener_uid;

  // Handles start at 1 and are never reused within a session.
  uint64_t next_handle() { return next_handle_.fetch_add(1, std::memory_order_relaxed); }

  absl::Mutex mu;
  // The session's own devices (a worker each) in place of the daemon's, for
  // isolated devices. Declared before the buffers and queues on them, so
  // that it goes after them.
  absl::flat_hash_map<const Device*, std::shared_ptr<worker::IsolatedDevice>> isolated
      ABSL_GUARDED_BY(mu);
  // The same devices, under a lock of their own: a request may hold `mu`
  // for as long as its worker takes to answer (a kernel's load), and
  // close_session stops the session's workers first, without `mu`, so that
  // such a request fails at once rather than hold the close up.
  absl::Mutex workers_mu;
  std::vector<std::weak_ptr<worker::IsolatedDevice>> workers ABSL_GUARDED_BY(workers_mu);
  absl::flat_hash_map<uint64_t, SessionBuffer> buffers ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Module>> modules ABSL_GUARDED_BY(mu);
  // Shared: a launch compiles outside the session lock and keeps its kernel alive.
  absl::flat_hash_map<uint64_t, std::shared_ptr<Kernel>> kernels ABSL_GUARDED_BY(mu);
  // Shared: a wait runs outside the session lock and must keep its queue alive.
  absl::flat_hash_map<uint64_t, std::shared_ptr<SessionQueue>> queues ABSL_GUARDED_BY(mu);
  uint64_t buffer_bytes ABSL_GUARDED_BY(mu) = 0;
  // What the session holds of its tenant's quotas, given back when it
  // closes: itself, its queues, its modules' bytes, its kernels; and of the
  // daemon's own host memory, its modules' copies.
  struct Held {
    Charge session, queues, module_bytes, kernels, module_copies;
  };
  Held held ABSL_GUARDED_BY(mu);
  // Set when close_session takes the session's objects: a request that found
  // the session before it closed, and takes its lock after, makes nothing
  // more in it (no buffer no one frees, no worker for a session gone).
  bool closing ABSL_GUARDED_BY(mu) = false;
  // Submit streams, shared-memory channels and transfers open now (SessionSlot).
  std::atomic<uint32_t> streams{0};
  std::atomic<uint32_t> channels{0};
  std::atomic<uint32_t> transfers{0};
  // Its shared-memory channels that kad may lend to its worker (the direct path).
  ChannelLoans loans;

  // Streams and channels that serve this session end with it: each registers
  // a listener, run once when the session closes (at once if it already has).
  // Listeners run under the session's listener lock, so that once
  // remove_close_listener returns, its listener is not running and never
  // will: they must not block, nor add or remove listeners.
  uint64_t add_close_listener(std::function<void()> listener) {
    {
      absl::MutexLock lock(&listeners_mu_);
      if (!closed_) {
        listeners_.emplace_back(++last_listener_, std::move(listener));
        return last_listener_;
      }
    }
    listener();
    return 0;
  }
  void remove_close_listener(uint64_t id) {
    absl::MutexLock lock(&listeners_mu_);
    std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
  }
  // The engine calls this when it closes the session.
  void mark_closed() {
    absl::MutexLock lock(&listeners_mu_);
    closed_ = true;
    for (auto& [id, listener] : listeners_) listener();
    listeners_.clear();
  }

 private:
  absl::Mutex listeners_mu_;
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  uint64_t last_listener_ ABSL_GUARDED_BY(listeners_mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(listeners_mu_) = false;

  std::string id_;
  uint64_t serial_;
  std::string client_name_;
  std::string peer_;
  std::shared_ptr<Tenant> tenant_;
  std::atomic<uint64_t> next_handle_{1};
};

}  // namespace kad::server
