#include "server/worker/worker_pool.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/worker/wide_builds.h"
#include "server/worker/worker_confinement.h"
#include "spdlog/spdlog.h"

namespace kad::server::worker {

void set_pocl_worker_driver(WorkerOptions& options, const std::string& driver) {
  options.command.args.push_back(absl::StrCat("--pocl-worker-driver=", driver));
  options.kernels_hold_requests = pocl_driver_holds_requests(driver);
  options.build_variant = pocl_driver_build_variant(driver);
  options.wide_device = pocl_driver_has_wide_device(driver);
}

WorkerPool::WorkerPool(WorkerOptions options)
    : options_(std::move(options)), wide_builds_(std::make_unique<WideBuilds>(*this)) {
  refiller_ = std::thread([this] { refill(); });
  watchdog_ = std::thread([this] { watchdog(); });
}

WorkerPool::~WorkerPool() {
  wide_builds_.reset();  // its thread starts compile workers here
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  refiller_.join();
  watchdog_.join();
  absl::MutexLock lock(&mu_);
  ready_.clear();
}

void WorkerPool::keep_ready(const std::string& device_id) {
  absl::MutexLock lock(&mu_);
  if (std::find(devices_.begin(), devices_.end(), device_id) == devices_.end())
    devices_.push_back(device_id);
}

namespace {

// The ready worker an `owner`'s session may have, best first: one that holds
// that owner's kernels, then one that holds none; `workers.end()` if none.
std::vector<std::unique_ptr<WorkerProcess>>::iterator usable_by(
    std::vector<std::unique_ptr<WorkerProcess>>& workers, const std::string& owner) {
  auto preloaded_for_owner = std::find_if(workers.begin(), workers.end(), [&](const auto& w) {
    return !w->preloaded.empty() && w->preloaded_for == owner;
  });
  if (preloaded_for_owner != workers.end()) return preloaded_for_owner;
  return std::find_if(workers.begin(), workers.end(),
                      [](const auto& w) { return w->preloaded.empty(); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerPool::take(const std::string& device_id,
                                                                const std::string& owner) {
  absl::MutexLock lock(&mu_);
  auto usable = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return usable_by(ready_[device_id], owner) != ready_[device_id].end();
  };
  if (!usable()) {
    std::vector<std::string>& waiting = waiting_[device_id];
    waiting.push_back(owner);
    const uint64_t failures = failures_;
    auto started_or_failed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return usable() || failures_ != failures || stopping_;
    };
    mu_.Await(absl::Condition(&started_or_failed));
    waiting.erase(std::find(waiting.begin(), waiting.end(), owner));
    if (!usable()) {
      auto f = failed_.find(device_id);
      return f != failed_.end() ? f->second
                                : absl::UnavailableError("kad is stopping: no worker started");
    }
  }
  std::vector<std::unique_ptr<WorkerProcess>>& ready = ready_[device_id];
  auto chosen = usable_by(ready, owner);
  std::unique_ptr<WorkerProcess> w = std::move(*chosen);
  ready.erase(chosen);
  last_take_ = absl::Now();
  return w;
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerPool::start_compile_worker(
    const std::string& device_id) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.started;
    ++stats_.compile_workers;
  }
  absl::StatusOr<std::unique_ptr<WorkerProcess>> w =
      WorkerProcess::spawn(options_.command, device_id);
  if (!w.ok()) return w.status();
  if (absl::Status s = (*w)->await_hello(absl::Now() + options_.start_timeout); !s.ok()) return s;
  return w;
}

void WorkerPool::remember(const std::string& device_id, const std::string& owner,
                          uint64_t kernel_id, const std::shared_ptr<const std::string>& request) {
  absl::MutexLock lock(&mu_);
  std::vector<RecentKernel>& recent = recent_[device_id];
  std::erase_if(recent, [&](const RecentKernel& k) {
    return (k.id == kernel_id && k.owner == owner) || k.request.expired();
  });
  recent.insert(recent.begin(), {kernel_id, owner, request});
  if (recent.size() > kRecentKernels) recent.pop_back();
  last_owner_[device_id] = owner;
}

int WorkerPool::unserved(const std::string& device_id) {
  int n = 0;
  for (const std::string& owner : waiting_[device_id]) {
    if (usable_by(ready_[device_id], owner) == ready_[device_id].end()) ++n;
  }
  return n;
}

bool WorkerPool::take_waits_for(const std::string& device_id) {
  absl::MutexLock lock(&mu_);
  return unserved(device_id) > 0;
}

absl::Status WorkerPool::preload(WorkerProcess& worker, const std::string& device_id) {
  // One owner's kernels only: the spare is then that owner's alone.
  struct Held {
    uint64_t id;
    std::shared_ptr<const std::string> request;
  };
  std::vector<Held> recent;
  {
    absl::MutexLock lock(&mu_);
    const std::string& owner = last_owner_[device_id];
    for (const RecentKernel& k : recent_[device_id]) {
      if (k.owner != owner) continue;
      if (std::shared_ptr<const std::string> request = k.request.lock())
        recent.push_back({k.id, std::move(request)});
    }
    worker.preloaded_for = owner;
  }
  const absl::Time budget = absl::Now() + kPreloadBudget;
  for (const Held& k : recent) {
    const IdRecord r{k.id};
    // A kernel whose load ends its worker is preloaded no more: a client's
    // kernel cannot keep every spare from starting.
    auto failed = [&](const absl::Status& s) {
      absl::MutexLock lock(&mu_);
      std::erase_if(recent_[device_id], [&](const RecentKernel& e) { return e.id == k.id; });
      return absl::Status(s.code(), absl::StrFormat("kernel %d: %s", k.id, s.message()));
    };
    if (absl::Status s =
            worker.send(Op::kLoadKernel, bytes_of(r),
                        std::as_bytes(std::span<const char>(k.request->data(), k.request->size())));
        !s.ok()) {
      return failed(s);
    }
    absl::Status loaded;
    uint32_t flags = 0;
    if (absl::Status s = worker.read_status(
            std::min(absl::Now() + options_.compile_timeout, budget), &loaded, &flags);
        !s.ok()) {
      return failed(s);
    }
    if (loaded.ok()) {
      worker.preloaded.insert(k.id);
      note_load((flags & kLoadedProgramBinary) != 0);
    }
  }
  return absl::OkStatus();
}

void WorkerPool::watch(std::weak_ptr<DeadlineWatched> device) {
  absl::MutexLock lock(&mu_);
  watched_.push_back(std::move(device));
}

void WorkerPool::watchdog() {
  for (;;) {
    std::vector<std::shared_ptr<DeadlineWatched>> devices;
    {
      absl::MutexLock lock(&mu_);
      // Four times a second: a launch ends at most that much past its deadline.
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(250))) return;
      std::erase_if(watched_, [](const auto& w) { return w.expired(); });
      for (const auto& w : watched_) {
        if (auto d = w.lock()) devices.push_back(std::move(d));
      }
    }
    for (const auto& d : devices) d->check_deadlines();
  }
}

WorkerPool::Stats WorkerPool::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  for (const auto& [device, ready] : ready_) {
    s.ready += ready.size();
    for (const auto& w : ready) s.ready_preloaded += w->preloaded.empty() ? 0 : 1;
  }
  return s;
}

void WorkerPool::note_lost(bool deadline) {
  absl::MutexLock lock(&mu_);
  ++(deadline ? stats_.timed_out : stats_.crashed);
}

void WorkerPool::note_load(bool from_binary) {
  absl::MutexLock lock(&mu_);
  ++(from_binary ? stats_.binary_loads : stats_.source_loads);
}

void WorkerPool::refill() {
  // As many starts at once as there are cores: a worker's start is mostly its
  // own CPU time (loading kad, starting the driver), so a burst of new
  // sessions waits for one round of starts, not one start after another.
  const size_t at_once = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  for (;;) {
    struct Start {
      std::string device;
      bool spare;  // for no take waiting now: it may take time to preload
    };
    std::vector<Start> batch;
    {
      absl::MutexLock lock(&mu_);
      // A device whose takes unserved and spares outnumber its ready and
      // starting workers, or whose takes unserved outnumber its starting
      // ones alone: the ready ones may hold other owners' kernels.
      auto short_of = [this](const std::string& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        const bool spares = std::find(devices_.begin(), devices_.end(), d) != devices_.end();
        const int takes = unserved(d);
        const size_t want = static_cast<size_t>(takes + (spares ? options_.spares : 0));
        return ready_[d].size() + static_cast<size_t>(starting_[d]) < want || starting_[d] < takes;
      };
      auto next = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::string {
        for (const auto& [d, owners] : waiting_) {
          if (!owners.empty() && short_of(d)) return d;
        }
        for (const std::string& d : devices_) {
          if (short_of(d)) return d;
        }
        return {};
      };
      auto needs_one = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !next().empty();
      };
      auto take_waits = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        for (const auto& [d, owners] : waiting_) {
          if (unserved(d) > 0 && short_of(d)) return true;
        }
        return false;
      };
      mu_.Await(absl::Condition(&needs_one));
      if (stopping_) return;
      // A spare replaces a taken one a moment later: a worker's start is
      // about 90 ms of CPU, which the session that just took a worker would
      // otherwise share with its first launch. A take that waits is served
      // at once.
      if (const absl::Time calm = last_take_ + kSpareDelay; !take_waits() && absl::Now() < calm) {
        auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || take_waits(); };
        mu_.AwaitWithDeadline(absl::Condition(&woken), calm);
        continue;
      }
      for (std::string d; batch.size() < at_once && !(d = next()).empty();) {
        // The first starts go to the takes waiting; the rest are spares.
        batch.push_back({d, starting_[d] >= unserved(d)});
        ++starting_[d];
        ++stats_.started;
      }
    }
    std::vector<absl::StatusOr<std::unique_ptr<WorkerProcess>>> spawned;
    for (const Start& s : batch)
      spawned.push_back(WorkerProcess::spawn(options_.command, s.device));
    const absl::Time deadline = absl::Now() + options_.start_timeout;
    for (size_t i = 0; i < batch.size(); ++i) {
      absl::StatusOr<std::unique_ptr<WorkerProcess>>& w = spawned[i];
      const std::string& device = batch[i].device;
      if (w.ok()) {
        if (absl::Status s = (*w)->await_hello(deadline); !s.ok()) w = s;
      }
      if (w.ok()) {
        absl::Status s = (*w)->attach_launch_ring(deadline);
        if (s.code() == absl::StatusCode::kFailedPrecondition) {
          // It still serves, launches by its socket.
          spdlog::warn("worker {}: {}", (*w)->pid(), std::string(s.message()));
        } else if (!s.ok()) {
          const std::string ended = (*w)->stop();
          w = absl::UnavailableError(
              absl::StrFormat("a worker for %s did not take its launch ring (%s; it %s)", device,
                              s.message(), ended));
        }
      }
      // A spare that fails while preloading is stopped (it could owe an
      // answer); the next one starts without the kernel that failed. One
      // that a take waits for now loads nothing ahead: it is then any
      // owner's, and that take has it at once.
      bool discarded = false;
      if (w.ok() && batch[i].spare && !take_waits_for(device)) {
        if (absl::Status s = preload(**w, device); !s.ok()) {
          const std::string ended = (*w)->stop();
          spdlog::warn(
              "a spare worker for {} failed loading the device's recent kernels ({}; it {})",
              device, std::string(s.message()), ended);
          discarded = true;
        } else if (options_.ready_spare) {
          options_.ready_spare(**w);
        }
      }
      absl::MutexLock lock(&mu_);
      --starting_[device];
      if (discarded) {
        ++stats_.failed_starts;
        continue;
      }
      if (!w.ok()) {
        // Takes waiting now fail with the reason; spares stop for this device
        // (a take still tries again).
        spdlog::warn("{}", std::string(w.status().message()));
        failed_[device] = w.status();
        ++failures_;
        ++stats_.failed_starts;
        devices_.erase(std::remove(devices_.begin(), devices_.end(), device), devices_.end());
        continue;
      }
      // Said once, and again should it change: an operator must know when
      // client code runs behind fewer walls than it could.
      const std::string walls = describe_walls((*w)->walls(), (*w)->landlock_abi());
      if (walls != stats_.walls) {
        if ((*w)->walls() == kAllWalls) {
          spdlog::info("workers on {} are confined: {}", device, walls);
        } else {
          spdlog::warn("workers on {} are confined less than they could be: {}", device, walls);
        }
        stats_.walls = walls;
      }
      ready_[device].push_back(*std::move(w));
    }
  }
}

}  // namespace kad::server::worker
