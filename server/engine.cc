#include "server/engine.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/kernel_lowering.h"
#include "core/launch.h"
#include "server/scheduled_queue.h"
#include "server/sealed_memfd.h"
#include "server/worker/isolated_device.h"
#include "spdlog/spdlog.h"

namespace kad::server {
namespace {

// A session id is the only credential of a session's requests once it is
// open (DESIGN §8): 192 bits from the system's CSPRNG, as 48 hex digits.
absl::StatusOr<std::string> new_session_id() {
  unsigned char bits[24];
  if (RAND_bytes(bits, sizeof(bits)) != 1) {
    return absl::UnavailableError(
        "kad cannot draw a session id: the system's random source failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bits), sizeof(bits)));
}

uint64_t half_of_physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{8} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

// The quota of launches in flight of `s`'s tenant, where it has one and it is full.
const Budget* full_launch_quota(const Session& s) {
  if (s.tenant() == nullptr) return nullptr;
  const Budget& b = *s.tenant()->budget(Quota::kLaunchesInFlight);
  return b.used() >= b.limit() ? &b : nullptr;
}

// Takes `mu` if it comes free by `deadline`. A session's lock may be held
// for as long as its worker takes to answer (a kernel's load, up to the
// compile timeout): what reads every session (status, drain) must not
// wait on any one of them.
bool lock_by(absl::Mutex& mu, absl::Time deadline) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  while (!mu.TryLock()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Microseconds(200));
  }
  return true;
}

// --max-host-memory, or half of the machine's memory.
uint64_t host_memory_guard(const EngineLimits& limits) {
  return limits.max_host_memory_bytes != 0 ? limits.max_host_memory_bytes
                                           : half_of_physical_memory();
}

std::vector<std::string> device_ids(const DeviceRegistry& registry) {
  std::vector<std::string> ids;
  for (const auto& d : registry.devices) ids.push_back(d->info().id);
  return ids;
}

// A wait returned for a queue's launches up to `target`: they are complete,
// and no longer count against its tenant.
void note_waited(SessionQueue& q, EventId target) {
  EventId seen = q.last_waited.load();
  while (target > seen && !q.last_waited.compare_exchange_weak(seen, target)) {
  }
  q.release_launches(target);
}

absl::StatusOr<std::unique_ptr<HostMemory>> make_host_memory(uint64_t bytes) {
  auto m = std::make_unique<HostMemory>();
  m->bytes = bytes;
  auto fd = create_sealed_memfd("kad-buffer", bytes);
  if (!fd.ok()) return fd.status();
  m->fd = *fd;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrFormat("cannot map %d bytes", bytes));
  }
  m->data = p;
  return m;
}

}  // namespace

HostMemory::~HostMemory() {
  // The device let go of it first (a buffer goes before its memory);
  // however long the client keeps its mapping, the pages go now.
  release_memfd_memory(fd, bytes);
  if (data) munmap(data, bytes);
  if (fd >= 0) close(fd);
}

Engine::Engine(DeviceRegistry registry, EngineLimits limits, worker::WorkerOptions workers)
    : registry_(std::move(registry)),
      limits_(limits),
      // Compiled kernels that no session holds keep at most half of the
      // guard: what a departed client compiled never starves those who stay.
      cache_(limits_.max_compiled_kernels, host_memory_guard(limits_) / 2),
      tenants_(limits_.tenants, device_ids(registry_)),
      host_memory_(std::make_shared<Budget>("kad",
                                            "bytes of its own host memory (module copies, shared "
                                            "buffers, channel and queue rings, program binaries)",
                                            "--max-host-memory", host_memory_guard(limits_))) {
  for (size_t i = 0; i < registry_.devices.size(); ++i)
    device_launches_.push_back(std::make_unique<std::atomic<uint64_t>>(0));
  if (!workers.command.executable.empty()) {
    // Tenants' CPU shares by control groups where kad may make them.
    if (absl::StatusOr<std::unique_ptr<worker::CpuGroups>> groups = worker::CpuGroups::open();
        groups.ok()) {
      cpu_groups_ = *std::move(groups);
      spdlog::info("tenants' workers share the CPU by their weights in CPU groups under {}",
                   cpu_groups_->path());
    } else {
      spdlog::info("tenants' workers share the CPU by niceness alone: {}",
                   std::string(groups.status().message()));
    }
    if (cpu_groups_) {
      // Most sessions are the default tenant's: spares wait in its group.
      workers.ready_spare = [groups = cpu_groups_.get(),
                             fallback = tenants_.resolve({})](worker::WorkerProcess& w) {
        if (absl::Status s = groups->place(w.pid(), fallback->name(), fallback->spec().weight,
                                           fallback->higher_classes());
            s.ok()) {
          w.cpu_group = fallback->name();
        } else {
          spdlog::warn("spare worker {}: {}", w.pid(), std::string(s.message()));
        }
      };
    }
    workers.charge_host_memory =
        [guard = host_memory_](uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
      absl::StatusOr<Charge> charge = Charge::take(guard, bytes);
      if (!charge.ok()) return charge.status();
      return std::make_shared<Charge>(*std::move(charge));
    };
    workers_ = std::make_unique<worker::WorkerPool>(std::move(workers));
    for (const auto& d : registry_.devices) {
      if (!isolated(*d)) continue;
      workers_->keep_ready(d->info().id);
      if (workers_->options().scope == worker::WorkerScope::kDevice) {
        auto host =
            std::make_shared<worker::WorkerHost>(*d, *workers_, worker::WorkerScope::kDevice);
        workers_->watch(host);
        device_workers_.emplace(d.get(), std::move(host));
      }
    }
  }
  // Every device's launches are scheduled, whether sessions share it in
  // this process or each has a worker of its own there (device_scheduler.h).
  for (const auto& d : registry_.devices) {
    schedulers_.push_back(limits_.device_queue_depth == 0
                              ? nullptr
                              : std::make_unique<DeviceScheduler>(
                                    limits_.device_queue_depth,
                                    isolated(*d)
                                        ? DeviceScheduler::OneTenantsQueues::kShareTheContendedDepth
                                        : DeviceScheduler::OneTenantsQueues::kFirstLaunchAtOnce,
                                    d->info().limits.compute_units));
  }
}

bool Engine::isolated(const Device& shared) const {
  // A CPU device runs kernels as native code that can reach its whole
  // process: one worker per session (or per device, --worker-scope).
  // (GPU devices: still in this process.)
  return workers_ != nullptr && shared.info().is_cpu;
}

Device* Engine::session_device(Session& s, Device* shared) {
  if (!isolated(*shared)) return shared;
  std::shared_ptr<worker::IsolatedDevice>& own = s.isolated[shared];
  if (!own && device_workers_.contains(shared)) {
    // The device's one worker, which every session on it shares.
    own = std::make_shared<worker::IsolatedDevice>(*shared, device_workers_.at(shared));
  } else if (!own) {
    worker::CpuShare share;
    if (const Tenant* t = s.tenant()) {
      share = {t->nice(), cpu_groups_.get(), t->name(), t->spec().weight, t->higher_classes()};
    }
    // Whose code its worker may hold besides the session's own: that of
    // sessions of the same tenant and, where the transport says, the same
    // uid (two people in the default tenant are not one).
    std::string owner = absl::StrCat(s.tenant() != nullptr ? s.tenant()->name() : "", "/",
                                     s.opener_uid ? absl::StrCat(*s.opener_uid) : "-");
    own = std::make_shared<worker::IsolatedDevice>(*shared, *workers_, std::move(share),
                                                   std::move(owner));
    workers_->watch(own->host());
    absl::MutexLock lock(&s.workers_mu);
    s.workers.push_back(own);
  }
  return own.get();
}

Engine::~Engine() {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) ids.push_back(id);
  }
  for (const std::string& id : ids) close_session(id);
}

absl::StatusOr<std::shared_ptr<Session>> Engine::open_session(std::string client_name,
                                                              std::string peer,
                                                              const CallerIdentity& caller) {
  if (draining()) return absl::UnavailableError("kad is shutting down: no new sessions");
  absl::StatusOr<std::string> id = new_session_id();
  if (!id.ok()) return id.status();
  std::shared_ptr<Tenant> tenant = tenants_.resolve(caller);
  Session::Held held;
  absl::StatusOr<Charge> session = tenant->charge(Quota::kSessions, 1);
  if (!session.ok()) return session.status();
  held.session = *std::move(session);
  // Charged as the session grows; none yet.
  held.queues = *tenant->charge(Quota::kQueues, 0);
  held.module_bytes = *tenant->charge(Quota::kModuleBytes, 0);
  held.kernels = *tenant->charge(Quota::kKernels, 0);
  held.module_copies = *Charge::take(host_memory_, 0);
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("kad already serves %d sessions, its maximum", sessions_.size()));
  }
  auto s = std::make_shared<Session>(*std::move(id), sessions_opened_.fetch_add(1) + 1,
                                     std::move(client_name), std::move(peer), std::move(tenant));
  s->opener_uid = caller.uid;
  {
    absl::MutexLock session_lock(&s->mu);
    s->held = std::move(held);
  }
  sessions_.emplace(s->id(), s);
  return s;
}

void Engine::close_session(const std::string& id, CloseWait wait) {
  std::shared_ptr<Session> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    s = it->second;
    sessions_.erase(it);
  }
  s->mark_closed();
  // The session's objects go once the device has finished its work (its
  // memory may be in use until then), on the finisher's thread; the close
  // waits for that only so long. Destroyed last to first: kernels first.
  struct Objects {
    // A session's workers go last, after what lives on them; stopping one
    // ends its launches at once, so a close does not wait for them.
    absl::flat_hash_map<const Device*, std::shared_ptr<worker::IsolatedDevice>> isolated;
    absl::flat_hash_map<uint64_t, std::shared_ptr<SessionQueue>> queues;
    absl::flat_hash_map<uint64_t, SessionBuffer> buffers;
    absl::flat_hash_map<uint64_t, std::shared_ptr<const Module>> modules;
    absl::flat_hash_map<uint64_t, std::shared_ptr<Kernel>> kernels;
  };
  auto objects = std::make_shared<Objects>();
  std::vector<std::shared_ptr<SessionQueue>> queues;
  Session::Held held;  // given back as this returns
  {
    // Its workers first, without the session's lock, which a request may
    // hold while it waits on one of them: that request now fails at once.
    absl::MutexLock lock(&s->workers_mu);
    for (const auto& w : s->workers) {
      if (std::shared_ptr<worker::IsolatedDevice> own = w.lock()) own->stop_worker();
    }
  }
  {
    absl::MutexLock lock(&s->mu);
    s->closing = true;
    held = std::move(s->held);
    // Their launches end now: a wait still running on one returns.
    for (const auto& [shared, own] : s->isolated) own->stop_worker();
    objects->isolated = std::move(s->isolated);
    objects->queues = std::move(s->queues);
    objects->buffers = std::move(s->buffers);
    objects->modules = std::move(s->modules);
    objects->kernels = std::move(s->kernels);
    s->isolated.clear();
    s->queues.clear();
    s->buffers.clear();
    s->modules.clear();
    s->kernels.clear();
    s->buffer_bytes = 0;
    for (const auto& [handle, q] : objects->queues) {
      if (!q->isolated) queues.push_back(q);
      // Its launches no longer count as the tenant's: the session is gone.
      note_waited(*q, q->last_event.load());
    }
  }
  auto late = [seconds = absl::ToInt64Seconds(limits_.finish_timeout)] {
    spdlog::warn("a closed session's launches still run after {} s: its memory goes when they end",
                 seconds);
  };
  if (wait == CloseWait::kDetached) {
    finisher_.finish_detached(std::move(queues), std::move(objects), limits_.finish_timeout,
                              std::move(late));
  } else if (!finisher_.finish(std::move(queues), std::move(objects), limits_.finish_timeout)) {
    late();
  }
}

absl::StatusOr<std::shared_ptr<Session>> Engine::session(absl::string_view id) {
  if (id.empty()) {
    return absl::FailedPreconditionError(
        "no session: open one with OpenSession and send its id as metadata `kad-session`");
  }
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrFormat("no open session has id `%s`", id));
  }
  return it->second;
}

absl::StatusOr<Device*> Engine::device_for(absl::string_view id) const {
  if (id.empty()) {
    Device* d = registry_.default_device();
    if (d == nullptr) return absl::UnavailableError("kad has no device");
    return d;
  }
  Device* d = registry_.find(id);
  if (d == nullptr) return absl::NotFoundError(absl::StrFormat("no device has id `%s`", id));
  return d;
}

size_t Engine::device_index(const Device* device) const {
  size_t index = 0;
  while (index + 1 < registry_.devices.size() && registry_.devices[index].get() != device) ++index;
  return index;
}

absl::Status Engine::check_new_object(Session& s) {
  if (s.closing) return absl::FailedPreconditionError("the session is closing: request refused");
  const size_t objects = s.buffers.size() + s.modules.size() + s.kernels.size() + s.queues.size();
  if (objects >= limits_.max_objects_per_session) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("session holds %d objects, its maximum", limits_.max_objects_per_session));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SessionQueue>> Engine::find_queue(Session& s, uint64_t queue) {
  auto it = s.queues.find(queue);
  if (it == s.queues.end()) {
    return absl::NotFoundError(absl::StrFormat("session has no queue %d", queue));
  }
  return it->second;
}

absl::StatusOr<Buffer*> Engine::find_buffer(Session& s, uint64_t buffer) {
  auto it = s.buffers.find(buffer);
  if (it == s.buffers.end()) {
    return absl::NotFoundError(absl::StrFormat("session has no buffer %d", buffer));
  }
  return it->second.buffer.get();
}

absl::StatusOr<Engine::AllocatedBuffer> Engine::allocate_buffer(Session& s,
                                                                absl::string_view device_id,
                                                                uint64_t size) {
  absl::StatusOr<Device*> device = device_for(device_id);
  if (!device.ok()) return device.status();
  absl::MutexLock lock(&s.mu);
  if (absl::Status q = check_new_object(s); !q.ok()) return q;
  if (size > limits_.max_buffer_bytes_per_session - s.buffer_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a buffer of %d bytes would take the session past its quota of %d bytes (%d in use)", size,
        limits_.max_buffer_bytes_per_session, s.buffer_bytes));
  }
  SessionBuffer entry;
  if (s.tenant() != nullptr) {
    absl::StatusOr<Charge> memory =
        s.tenant()->charge(Quota::kDeviceMemory, size, device_index(*device));
    if (!memory.ok()) return memory.status();
    entry.memory = *std::move(memory);
  }
  entry.device = session_device(s, *device);
  if (limits_.zero_copy && (*device)->info().host_visible && size > 0 &&
      size <= (*device)->info().limits.max_allocation_bytes) {
    absl::StatusOr<Charge> guard = charge_host_memory(size);
    if (!guard.ok()) return guard.status();
    entry.host_memory = *std::move(guard);
    absl::StatusOr<std::unique_ptr<HostMemory>> host = make_host_memory(size);
    if (!host.ok()) return host.status();
    absl::StatusOr<std::unique_ptr<Buffer>> b =
        entry.device->import_host_memory({(*host)->data, size, (*host)->fd});
    if (!b.ok()) return b.status();
    entry.host = *std::move(host);
    entry.buffer = *std::move(b);
  } else {
    absl::StatusOr<std::unique_ptr<Buffer>> b = entry.device->allocate(size);
    if (!b.ok()) return b.status();
    entry.buffer = *std::move(b);
  }
  const uint64_t handle = s.next_handle();
  const bool host_visible = entry.host != nullptr;
  s.buffers.emplace(handle, std::move(entry));
  s.buffer_bytes += size;
  return AllocatedBuffer{handle, host_visible};
}

namespace {

// Takes `s.mu` within `wait` (polling: absl::Mutex has no timed lock), or
// says why not.
absl::Status lock_session_within(Session& s, absl::Duration wait) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (wait == absl::InfiniteDuration()) {
    s.mu.Lock();
    return absl::OkStatus();
  }
  const absl::Time give_up = absl::Now() + wait;
  while (!s.mu.TryLock()) {
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrFormat(
          "the session is busy (a command of its has held it for %s, a copy waiting for its "
          "launches): try again",
          absl::FormatDuration(wait)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

// Releases a session lock that lock_session_within took.
struct SessionUnlock {
  Session& s;
  ~SessionUnlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { s.mu.Unlock(); }
};

}  // namespace

absl::StatusOr<Engine::MappedBuffer> Engine::map_buffer(Session& s, uint64_t buffer,
                                                        absl::Duration lock_wait) {
  if (absl::Status locked = lock_session_within(s, lock_wait); !locked.ok()) return locked;
  const SessionUnlock unlock{s};
  auto it = s.buffers.find(buffer);
  if (it == s.buffers.end()) {
    return absl::NotFoundError(absl::StrFormat("session has no buffer %d", buffer));
  }
  if (!it->second.host) {
    return absl::FailedPreconditionError(
        absl::StrFormat("buffer %d lives in device memory of %s: copy it instead of mapping it",
                        buffer, it->second.device->info().id));
  }
  const int fd = fcntl(it->second.host->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::ResourceExhaustedError("cannot duplicate the buffer's memfd");
  return MappedBuffer{fd, it->second.host->bytes};
}

absl::Status Engine::free_buffer(Session& s, uint64_t buffer) {
  const ChannelLoans::Hold lent_plans_name_buffers = hold_channels(s, 0);
  absl::MutexLock lock(&s.mu);
  auto it = s.buffers.find(buffer);
  if (it == s.buffers.end()) {
    return absl::NotFoundError(absl::StrFormat("session has no buffer %d", buffer));
  }
  // Shared host memory is unmapped at once, so it may not go while launches
  // are queued.
  if (it->second.host) {
    for (const auto& [h, q] : s.queues) {
      if (q->last_event.load() > q->last_waited.load()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "buffer %d is shared memory and queue %d has launches not yet waited for: wait, "
            "then free",
            buffer, h));
      }
    }
  }
  // Device memory may still be in use by launches not yet waited for. OpenCL
  // keeps it alive for them, but Level Zero's and HSA's frees do not wait:
  // finish this session's queues on the device first (only its own launches
  // can name the buffer), so no backend frees memory a kernel still uses.
  std::vector<std::shared_ptr<SessionQueue>> running;
  for (const auto& [h, q] : s.queues) {
    if (q->device != it->second.device || q->last_event.load() <= q->last_waited.load()) continue;
    running.push_back(q);
  }
  if (!running.empty() && !finisher_.finish(std::move(running), nullptr, limits_.finish_timeout)) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "buffer %d not freed: this session's launches on %s still run after %d s (kad's "
        "--drain-timeout); the buffer is kept",
        buffer, it->second.device->info().id, absl::ToInt64Seconds(limits_.finish_timeout)));
  }
  s.buffer_bytes -= it->second.buffer->size();
  s.buffers.erase(it);
  return absl::OkStatus();
}

absl::Status Engine::check_buffer_range(Session& s, uint64_t buffer, uint64_t offset,
                                        uint64_t size) {
  absl::MutexLock lock(&s.mu);
  absl::StatusOr<Buffer*> b = find_buffer(s, buffer);
  if (!b.ok()) return b.status();
  return kad::check_buffer_range(**b, offset, size);
}

absl::StatusOr<Engine::CopyTarget> Engine::copy_target(Session& s, uint64_t queue,
                                                       uint64_t buffer) {
  absl::StatusOr<std::shared_ptr<SessionQueue>> q = find_queue(s, queue);
  if (!q.ok()) return q.status();
  absl::StatusOr<Buffer*> b = find_buffer(s, buffer);
  if (!b.ok()) return b.status();
  if (&(*b)->device() != (*q)->device) {
    return absl::InvalidArgumentError(absl::StrFormat("buffer %d is on device %s, queue %d on %s",
                                                      buffer, (*b)->device().info().id, queue,
                                                      (*q)->device->info().id));
  }
  return CopyTarget{q->get(), *b};
}

absl::Status Engine::write_buffer(Session& s, uint64_t queue, uint64_t buffer, uint64_t offset,
                                  std::span<const std::byte> data) {
  return write_buffer_pieces(s, queue, buffer, offset, {&data, 1});
}

absl::Status Engine::write_buffer_pieces(Session& s, uint64_t queue, uint64_t buffer,
                                         uint64_t offset,
                                         std::span<const std::span<const std::byte>> pieces) {
  const ChannelLoans::Hold hold = hold_channels(s, queue);
  absl::MutexLock lock(&s.mu);
  absl::StatusOr<CopyTarget> t = copy_target(s, queue, buffer);
  if (!t.ok()) return t.status();
  // A copy comes after the queue's launches (under the session's lock: no
  // launch joins meanwhile), and is their wait when it succeeds.
  const EventId launched = t->queue->last_event.load();
  absl::Status copied = t->queue->queue->write_buffer_pieces(*t->buffer, offset, pieces);
  if (copied.ok()) note_waited(*t->queue, launched);
  return copied;
}

absl::Status Engine::read_buffer(Session& s, uint64_t queue, uint64_t buffer, uint64_t offset,
                                 std::span<std::byte> data) {
  const ChannelLoans::Hold hold = hold_channels(s, queue);
  absl::MutexLock lock(&s.mu);
  absl::StatusOr<CopyTarget> t = copy_target(s, queue, buffer);
  if (!t.ok()) return t.status();
  const EventId launched = t->queue->last_event.load();  // as write_buffer_pieces
  absl::Status copied = t->queue->queue->read_buffer(*t->buffer, offset, data);
  if (copied.ok()) note_waited(*t->queue, launched);
  return copied;
}

absl::StatusOr<Engine::LoadedModule> Engine::load_module(Session& s, ModuleFormat format,
                                                         std::string code) {
  absl::StatusOr<std::shared_ptr<const Module>> m = Module::create(format, std::move(code));
  if (!m.ok()) return m.status();
  if (absl::Status s = KernelLowering::shared().verify(**m); !s.ok()) return s;
  absl::MutexLock lock(&s.mu);
  if (absl::Status q = check_new_object(s); !q.ok()) return q;
  if (s.tenant() != nullptr) {
    const uint64_t size = (*m)->bytes().size();
    if (absl::Status q = s.held.module_bytes.grow(size); !q.ok()) return q;
    if (absl::Status q = s.held.module_copies.grow(size); !q.ok()) {
      s.held.module_bytes.shrink(size);
      return q;
    }
  }
  const uint64_t handle = s.next_handle();
  LoadedModule out{handle, (*m)->digest()};
  s.modules.emplace(handle, *std::move(m));
  return out;
}

absl::StatusOr<uint64_t> Engine::get_kernel(Session& s, uint64_t module,
                                            KernelSignature signature) {
  std::shared_ptr<const Module> m;
  {
    absl::MutexLock lock(&s.mu);
    auto it = s.modules.find(module);
    if (it == s.modules.end()) {
      return absl::NotFoundError(absl::StrFormat("session has no module %d", module));
    }
    m = it->second;
  }
  absl::StatusOr<std::unique_ptr<Kernel>> k = Kernel::create(m, std::move(signature));
  if (!k.ok()) return k.status();
  // Once any session compiled this entry, its parameters are known: a
  // signature that does not match them is refused now, not at a launch.
  const KernelSignature& sig = (*k)->signature();
  if (std::optional<std::vector<KernelParameter>> params =
          cache_.parameters(m->digest(), sig.entry, sig.build_options)) {
    if (absl::Status st = check_signature(sig, *params); !st.ok()) return st;
  }
  absl::MutexLock lock(&s.mu);
  if (absl::Status q = check_new_object(s); !q.ok()) return q;
  if (s.tenant() != nullptr) {
    if (absl::Status q = s.held.kernels.grow(1); !q.ok()) return q;
  }
  const uint64_t handle = s.next_handle();
  s.kernels.emplace(handle, *std::move(k));
  return handle;
}

absl::StatusOr<uint64_t> Engine::create_queue(Session& s, absl::string_view device_id,
                                              absl::Duration launch_timeout,
                                              absl::Duration* effective) {
  absl::StatusOr<Device*> device = device_for(device_id);
  if (!device.ok()) return device.status();
  const size_t index = device_index(*device);
  absl::MutexLock lock(&s.mu);
  if (absl::Status quota = check_new_object(s); !quota.ok()) return quota;
  if (s.tenant() != nullptr) {
    if (absl::Status quota = s.held.queues.grow(1); !quota.ok()) return quota;
  }
  Device* on = session_device(s, *device);
  absl::Duration timeout = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<Queue>> q;
  if (on != *device) {
    const absl::Duration cap = workers_->options().launch_timeout;
    timeout = launch_timeout <= absl::ZeroDuration() ? cap : std::min(launch_timeout, cap);
    q = s.isolated[*device]->create_queue(timeout);
  } else {
    q = on->create_queue();
  }
  auto sq = std::make_shared<SessionQueue>();
  if (s.tenant() != nullptr) sq->launches_in_flight = s.tenant()->budget(Quota::kLaunchesInFlight);
  // A queue on a scheduled device holds its held launches' ring in kad's
  // memory: a client's queues count against the host-memory guard.
  if (q.ok() && schedulers_[index] != nullptr) {
    absl::StatusOr<Charge> charge =
        charge_host_memory(ScheduledQueue::host_bytes(schedulers_[index]->depth()));
    if (charge.ok()) {
      sq->host_memory = *std::move(charge);
      const Tenant* tenant = s.tenant();
      // The scheduler sees launches end whether or not the client waits:
      // they stop counting against the tenant then (sq outlives its queue).
      q = std::unique_ptr<Queue>(std::make_unique<ScheduledQueue>(
          *schedulers_[index], *std::move(q), tenant, tenant ? tenant->spec().weight : 1,
          tenant ? tenant->spec().priority : 0,
          [released = sq.get()](EventId ended) { released->release_launches(ended); }));
    } else {
      q = charge.status();
    }
  }
  if (!q.ok()) {
    if (s.tenant() != nullptr) s.held.queues.shrink(1);
    return q.status();
  }
  if (effective != nullptr) *effective = timeout;
  sq->queue = *std::move(q);
  sq->device = on;
  sq->device_index = index;
  // A worker of the session's own is stopped at its close; the device's,
  // which serves other sessions, finishes the session's launches first.
  if (on != *device) {
    sq->owner = s.isolated[*device];
    sq->isolated = sq->owner->owns_worker();
  }
  const uint64_t handle = s.next_handle();
  s.queues.emplace(handle, std::move(sq));
  return handle;
}

absl::Status Engine::check_queue(Session& s, uint64_t queue, absl::Duration lock_wait) {
  if (absl::Status locked = lock_session_within(s, lock_wait); !locked.ok()) return locked;
  const SessionUnlock unlock{s};
  return find_queue(s, queue).status();
}

absl::StatusOr<LaunchResult> Engine::launch(Session& s, const LaunchByHandle& request) {
  if (draining()) return absl::UnavailableError("kad is shutting down: launch refused");
  const ChannelLoans::Hold hold = hold_channels(s, request.queue);
  if (request.args.size() > kMaxKernelArgs) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a launch has %d arguments, more than the maximum of %d",
                        request.args.size(), kMaxKernelArgs));
  }
  // A launch that must compile first compiles outside the session's lock
  // (DESIGN §8: no compile under a lock that others need), then launches.
  DeferredCompile deferred;
  std::shared_ptr<Kernel> kernel;
  const Budget* full_quota = nullptr;
  {
    absl::MutexLock lock(&s.mu);
    absl::StatusOr<LaunchResult> r = launch_locked(s, request, &deferred, &kernel);
    // Where a scheduler watches every queue, it gave back what ended.
    if (r.status().code() == absl::StatusCode::kResourceExhausted &&
        limits_.device_queue_depth == 0)
      full_quota = full_launch_quota(s);
    if (full_quota == nullptr && (!r.ok() || !deferred.needed)) return r;
  }
  if (full_quota != nullptr) {
    // At the tenant's quota: launches that ended unseen go back, and this
    // one tries once more.
    reclaim_ended_launches(*full_quota);
    absl::MutexLock lock(&s.mu);
    absl::StatusOr<LaunchResult> r = launch_locked(s, request, &deferred, &kernel);
    if (!r.ok() || !deferred.needed) return r;
  }
  bool compiled = false;
  absl::StatusOr<CompiledKernel*> c =
      kernel->specialization(*deferred.device, deferred.spec, cache_, &compiled);
  if (!c.ok()) return c.status();
  absl::MutexLock lock(&s.mu);  // the session may have changed meanwhile: resolve again
  absl::StatusOr<LaunchResult> r = launch_locked(s, request, nullptr, nullptr);
  if (r.ok()) r->compiled = compiled;
  return r;
}

void Engine::reclaim_ended_launches(const Budget& budget) {
  // Only the tenant's sessions: a client at its quota must not make kad
  // take every other tenant's sessions' locks.
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (s->tenant() != nullptr && s->tenant()->budget(Quota::kLaunchesInFlight).get() == &budget)
        sessions.push_back(s);
    }
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(20);
  for (const auto& s : sessions) {
    if (!lock_by(s->mu, deadline)) continue;
    absl::Cleanup unlock = [&s]() ABSL_NO_THREAD_SAFETY_ANALYSIS { s->mu.Unlock(); };
    for (const auto& [handle, q] : s->queues) {
      if (q->launches_in_flight.get() != &budget) continue;
      const EventId last = q->last_event.load();
      if (last > q->released.load() && q->queue->known_ended(last)) q->release_launches(last);
    }
  }
}

absl::StatusOr<LaunchResult> Engine::launch_locked(Session& s, const LaunchByHandle& request,
                                                   DeferredCompile* defer,
                                                   std::shared_ptr<Kernel>* kernel) {
  absl::StatusOr<std::shared_ptr<SessionQueue>> q = find_queue(s, request.queue);
  if (!q.ok()) return q.status();
  auto k = s.kernels.find(request.kernel);
  if (k == s.kernels.end()) {
    return absl::NotFoundError(absl::StrFormat("session has no kernel %d", request.kernel));
  }
  // Resolve buffer handles into a fixed array: no allocation on this path.
  std::array<KernelArg, kMaxKernelArgs> args;
  for (size_t i = 0; i < request.args.size(); ++i) {
    args[i] = request.args[i];
    if (args[i].kind == ArgKind::kBuffer || args[i].kind == ArgKind::kConstBuffer) {
      auto b = s.buffers.find(request.args[i].bits);
      if (b == s.buffers.end()) {
        return absl::NotFoundError(absl::StrFormat(
            "kernel `%s`: argument %d names buffer %d, which this session does not have",
            k->second->name(), i, request.args[i].bits));
      }
      args[i].buffer = b->second.buffer.get();
      args[i].bits = 0;
    }
  }
  SessionQueue& sq = **q;
  // The tenant's launches in flight are bounded: checked here, counted once
  // the launch has its event (a launch that fails takes nothing), given back
  // when it is known to have ended (SessionQueue::release_launches).
  if (const Budget* in_flight = sq.launches_in_flight.get();
      in_flight != nullptr && in_flight->used() >= in_flight->limit())
    return in_flight->exhausted(1);
  absl::StatusOr<LaunchResult> r =
      kad::launch(*k->second, *sq.queue, cache_,
                  {request.ndrange, request.workgroup,
                   std::span<const KernelArg>(args.data(), request.args.size())},
                  defer);
  if (!r.ok()) return r;
  if (defer != nullptr && defer->needed) {
    *kernel = k->second;
    return r;
  }
  if (r->event != 0) sq.count_launches(r->event);
  launches_.fetch_add(1, std::memory_order_relaxed);
  device_launches_[sq.device_index]->fetch_add(1, std::memory_order_relaxed);
  return r;
}

absl::Status Engine::wait(Session& s, uint64_t queue, EventId event) {
  const ChannelLoans::Hold hold = hold_channels(s, queue);
  std::shared_ptr<SessionQueue> q;
  {
    absl::MutexLock lock(&s.mu);
    absl::StatusOr<std::shared_ptr<SessionQueue>> found = find_queue(s, queue);
    if (!found.ok()) return found.status();
    q = *std::move(found);
  }
  const EventId target = event == 0 ? q->last_event.load() : event;
  absl::Status waited = q->queue->wait(target);
  // Events of a queue are consecutive launches: everything up to `target` is done.
  if (waited.ok()) note_waited(*q, target);
  return waited;
}

absl::StatusOr<Engine::ChannelLoan> Engine::lend_channel(Session& s, uint64_t queue,
                                                         EventId launched,
                                                         const shm::v1::SubmitRecord& key,
                                                         const shm::v1::CompletionRecord& done,
                                                         int channel_fd, RingPositions at,
                                                         ChannelLoans::Lender& lender) {
  if (draining()) return absl::UnavailableError("kad is shutting down");
  // Under the session's lock: no launch joins the queue meanwhile.
  absl::MutexLock lock(&s.mu);
  if (s.closing) return absl::FailedPreconditionError("the session closes");
  absl::StatusOr<std::shared_ptr<SessionQueue>> q = find_queue(s, queue);
  if (!q.ok()) return q.status();
  SessionQueue& sq = **q;
  if (sq.owner == nullptr || !sq.owner->owns_worker())
    return absl::FailedPreconditionError("the queue is not on a worker of the session's own");
  if (sq.last_event.load() != launched || launched == 0)
    return absl::FailedPreconditionError("the launch is not the queue's newest");
  // The plan's buffers, before the scheduler counts the queue lent.
  std::array<uint64_t, shm::v1::kMaxArgs> buffer_bytes{};
  for (uint32_t i = 0; i < key.nargs && i < shm::v1::kMaxArgs; ++i) {
    if (static_cast<shm::v1::ArgKind>(key.args[i].kind) != shm::v1::ArgKind::kBuffer) continue;
    auto b = s.buffers.find(key.args[i].value);
    if (b == s.buffers.end()) return absl::FailedPreconditionError("a buffer of the plan is gone");
    buffer_bytes[i] = b->second.buffer->size();
  }
  auto* scheduled = dynamic_cast<ScheduledQueue*>(sq.queue.get());
  if (scheduled != nullptr) {
    if (absl::Status lent = scheduled->lend(lender); !lent.ok()) return lent;
  }
  Queue& device_queue = scheduled != nullptr ? scheduled->device_queue() : *sq.queue;
  auto loan = std::make_unique<worker::ServeChannelRecord>();  // 5 KB, once per loan
  loan->event_base = launched;
  loan->submit_head = at.submit_head;
  loan->completion_tail = at.completion_tail;
  loan->plan.key = key;
  loan->plan.linear = done.linear;
  loan->plan.index_bits = done.index_bits;
  loan->plan.rank = done.rank;
  loan->plan.workgroup_rank = done.workgroup_rank;
  std::memcpy(loan->plan.workgroup, done.workgroup, sizeof(loan->plan.workgroup));
  std::memcpy(loan->plan.buffer_bytes, buffer_bytes.data(), sizeof(loan->plan.buffer_bytes));
  absl::StatusOr<std::shared_ptr<worker::ProgressPage>> page =
      sq.owner->lend_channel(device_queue, channel_fd, loan.get());
  if (!page.ok()) {
    if (scheduled != nullptr) scheduled->end_loan(0, absl::OkStatus());
    return page.status();
  }
  channels_lent_.fetch_add(1, std::memory_order_relaxed);
  channel_loans_.fetch_add(1, std::memory_order_relaxed);
  return ChannelLoan{*q, &device_queue, *std::move(page), launched};
}

void Engine::count_lent_launches(const ChannelLoan& loan, uint64_t n) {
  if (n == 0) return;
  launches_.fetch_add(n, std::memory_order_relaxed);
  lent_launches_.fetch_add(n, std::memory_order_relaxed);
  device_launches_[loan.queue->device_index]->fetch_add(n, std::memory_order_relaxed);
}

void Engine::end_channel_loan(Session& s, const ChannelLoan& loan, uint64_t launches, LoanEnd why) {
  loan_ends_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  SessionQueue& sq = *loan.queue;
  auto* scheduled = dynamic_cast<ScheduledQueue*>(sq.queue.get());
  // The scheduler counts them ended, so what they ended with goes with
  // them. The worker gave the queue back with nothing in flight (or is
  // gone): this returns at once, unless a failure is to be asked for.
  // Without a scheduler, the device's queue keeps it for the next wait.
  absl::Status ended =
      scheduled != nullptr && launches > 0 ? loan.device_queue->finish() : absl::OkStatus();
  absl::MutexLock lock(&s.mu);  // the writer of the queue's count
  if (scheduled != nullptr) scheduled->end_loan(launches, std::move(ended));
  // Never counted against the tenant: the worker ran them one at a time.
  const EventId last = sq.last_event.load() + launches;
  sq.released.fetch_add(launches);
  sq.last_event.store(last);
  note_waited(sq, last);
  channels_lent_.fetch_sub(1, std::memory_order_relaxed);
}

EngineCounters Engine::counters() const {
  EngineCounters c;
  c.cache = cache_.stats();
  c.launches = launches_.load();
  c.channels_lent = channels_lent_.load();
  c.channel_loans = channel_loans_.load();
  for (size_t i = 0; i < kLoanEnds; ++i) c.loan_ends[i] = loan_ends_[i].load();
  c.lent_launches = lent_launches_.load();
  c.sessions_opened = sessions_opened_.load();
  c.draining = draining();
  c.host_memory_bytes = host_memory_->used();
  c.host_memory_limit = host_memory_->limit();
  if (workers_) {
    const worker::WorkerPool::Stats w = workers_->stats();
    c.workers.running = w.ready;
    // The devices' shared workers; sessions' own are counted below.
    for (const auto& [device, host] : device_workers_) {
      if (host->worker_pid() > 0) ++c.workers.running;
    }
    c.workers.started = w.started;
    c.workers.crashed = w.crashed;
    c.workers.timed_out = w.timed_out;
    const worker::WideBuilds::Stats wide = workers_->wide_builds().stats();
    c.workers.wide_built = wide.built;
    c.workers.wide_from_cache = wide.from_cache;
    c.workers.wide_failed = wide.failed;
    c.workers.walls = w.walls;
  }
  for (size_t i = 0; i < registry_.devices.size(); ++i) {
    EngineCounters::PerDevice& d = c.devices.emplace_back();
    d.id = registry_.devices[i]->info().id;
    d.launches = device_launches_[i]->load();
    if (schedulers_[i] != nullptr) {
      const DeviceScheduler::Stats st = schedulers_[i]->stats();
      c.devices.back().queue_depth = st.depth;
      c.devices.back().in_flight = st.in_flight;
      c.devices.back().held = st.held;
      c.devices.back().held_total = st.held_total;
      c.devices.back().contended_depth = st.contended_depth;
      c.devices.back().launch_latency = st.latency;
    }
  }
  for (const std::shared_ptr<Tenant>& t : tenants_.all()) {
    EngineCounters::TenantUse& use = c.tenants.emplace_back();
    use.name = t->name();
    use.weight = t->spec().weight;
    use.priority = t->spec().priority;
    use.cpu_nice = t->nice();
    for (int i = 0; i < kQuotaCount; ++i) {
      const Quota q = static_cast<Quota>(i);
      const size_t devices = q == Quota::kDeviceMemory ? registry_.devices.size() : 1;
      for (size_t d = 0; d < devices; ++d) {
        const Budget& b = *t->budget(q, d);
        use.uses.push_back({quota_key(q),
                            q == Quota::kDeviceMemory ? registry_.devices[d]->info().id : "",
                            b.used(), b.limit(), b.refusals()});
      }
    }
  }
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    c.sessions = sessions_.size();
    for (const auto& [id, s] : sessions_) sessions.push_back(s);
  }
  // A session busy past this (its lock held by a request waiting on its
  // worker) is counted as busy, its objects not at all.
  const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
  for (const auto& s : sessions) {
    if (!lock_by(s->mu, deadline)) {
      ++c.sessions_busy;
      continue;
    }
    absl::Cleanup unlock = [&s]() ABSL_NO_THREAD_SAFETY_ANALYSIS { s->mu.Unlock(); };
    c.buffers += s->buffers.size();
    c.modules += s->modules.size();
    c.kernels += s->kernels.size();
    c.queues += s->queues.size();
    for (const auto& [h, b] : s->buffers) {
      for (auto& d : c.devices) {
        if (d.id != b.device->info().id) continue;
        ++d.buffers;
        d.buffer_bytes += b.buffer->size();
      }
    }
    for (const auto& [shared, own] : s->isolated) {
      if (own->owns_worker() && own->worker_pid() > 0) ++c.workers.running;
    }
    for (const auto& [h, q] : s->queues) {
      ++c.devices[q->device_index].queues;
      c.queue_depth += q->last_event.load() - std::min(q->last_waited.load(), q->last_event.load());
    }
  }
  return c;
}

bool Engine::drain(absl::Duration timeout) {
  draining_.store(true);
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) sessions.push_back(s);
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::shared_ptr<SessionQueue>> queues;
  for (const auto& s : sessions) {
    // A session whose lock a request holds while it waits on its worker
    // past the deadline: its launches are not waited for (its worker goes
    // as kad exits).
    if (!lock_by(s->mu, deadline)) {
      spdlog::warn("drain: {} is busy past the drain timeout; its launches are not waited for",
                   s->log_name());
      continue;
    }
    for (const auto& [h, q] : s->queues) queues.push_back(q);
    s->mu.Unlock();
  }
  // Then what closed sessions left running: the process must not wait on
  // it at exit either.
  return finisher_.finish(std::move(queues), nullptr, timeout) &&
         finisher_.wait_all(deadline - absl::Now());
}

}  // namespace kad::server
