#include "server/worker/wide_builds.h"

#include <pthread.h>

#include <system_error>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/worker/program_build.h"
#include "server/worker/worker_codec.h"
#include "server/worker/worker_pool.h"
#include "spdlog/spdlog.h"

namespace kad::server::worker {

WideBuilds::~WideBuilds() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  stoppable_.stop();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const WideBuilds::Build> WideBuilds::want(
    Device& device, const std::string& key, const std::string& entry,
    std::shared_ptr<const std::string> request) {
  {
    absl::MutexLock lock(&mu_);
    if (auto known = builds_.find(key); known != builds_.end()) return known->second;
  }
  auto build = std::make_shared<Build>();
  build->entry = entry;
  // Built before, by this kad or one before it: read without the lock, which
  // every session's launches that hand a build over take.
  if (std::optional<wire::CompileReply> cached = cached_build(key)) {
    build->binary = std::move(*cached->mutable_program_binary());
    build->done.store(true, std::memory_order_release);
  }
  absl::MutexLock lock(&mu_);
  // Another want of the key may have come meanwhile: one build per key.
  if (auto known = builds_.find(key); known != builds_.end()) return known->second;
  if (build->done.load(std::memory_order_relaxed)) {
    ++stats_.from_cache;
    keep(key, build);
    return build;
  }
  if (stopping_) {
    build->binary = absl::CancelledError("kad is stopping");
    build->done.store(true, std::memory_order_release);
    return build;
  }
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      build->binary = absl::ResourceExhaustedError(
          absl::StrFormat("kad cannot start a thread for builds: %s", e.what()));
      build->done.store(true, std::memory_order_release);
      return build;
    }
  }
  builds_[key] = build;
  jobs_.push_back({&device, key, std::move(request), build});
  ++unfinished_;
  return build;
}

void WideBuilds::keep(const std::string& key, std::shared_ptr<Build> build) {
  if (const auto& charge = pool_.options().charge_host_memory; charge) {
    absl::StatusOr<std::shared_ptr<void>> taken = charge(build->binary->size());
    if (!taken.ok()) return;
    build->charge = *std::move(taken);
  }
  stats_.kept_bytes += build->binary->size();
  builds_[key] = std::move(build);
  done_keys_.push_back(key);
  if (done_keys_.size() > kKept) {
    if (auto oldest = builds_.find(done_keys_.front()); oldest != builds_.end()) {
      stats_.kept_bytes -= oldest->second->binary->size();
      builds_.erase(oldest);
    }
    done_keys_.pop_front();
  }
}

bool WideBuilds::idle() const {
  absl::MutexLock lock(&mu_);
  return unfinished_ == 0;
}

void WideBuilds::note_given() {
  absl::MutexLock lock(&mu_);
  ++stats_.given;
}

WideBuilds::Stats WideBuilds::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void WideBuilds::run() {
  pthread_setname_np(pthread_self(), "kad-wide-build");
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WideBuilds* b)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->stopping_ || !b->jobs_.empty(); },
          this));
      if (stopping_) {
        for (Job& left : jobs_) {
          left.build->binary = absl::CancelledError("kad is stopping");
          left.build->done.store(true, std::memory_order_release);
        }
        unfinished_ -= jobs_.size();
        jobs_.clear();
        return;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const absl::Time started = absl::Now();
    absl::StatusOr<std::string> binary = make(job);
    if (binary.ok()) {
      spdlog::info(
          "kernel `{}` on {} built for every core in workers ({}, {} bytes), once for "
          "every session",
          job.build->entry, job.device->info().id, absl::FormatDuration(absl::Now() - started),
          binary->size());
    } else {
      spdlog::info(
          "kernel `{}` on {} stays on one core in workers: no build for the wide "
          "device ({})",
          job.build->entry, job.device->info().id, std::string(binary.status().message()));
    }
    absl::MutexLock lock(&mu_);
    ++(binary.ok() ? stats_.built : stats_.failed);
    --unfinished_;
    job.build->binary = std::move(binary);
    job.build->done.store(true, std::memory_order_release);
    // A failed build is asked again by the next want (a compile worker that
    // failed to start, say); a made one is kept for the next wants.
    builds_.erase(job.key);
    if (job.build->binary.ok()) keep(job.key, job.build);
  }
}

absl::StatusOr<std::string> WideBuilds::make(const Job& job) {
  wire::Compile kept;
  if (!kept.ParseFromString(*job.request))
    return absl::InternalError("kad's own compile request does not parse");
  absl::StatusOr<OwnedCompileRequest> request = from_message(kept);
  if (!request.ok()) return request.status();
  // Built from the code kad's tools lower, as the kernel's own build is,
  // not loaded from the binary for the worker's own device.
  absl::StatusOr<wire::Compile> message = compile_message(*job.device, request->view());
  if (!message.ok()) return message.status();
  absl::StatusOr<wire::CompileReply> reply =
      build_program(pool_, job.device->info(), job.key, Op::kCompileWide, job.build->entry,
                    message->SerializeAsString(), &stoppable_);
  if (!reply.ok()) return reply.status();
  // The compile worker's word, checked as any worker's.
  if (absl::StatusOr<CompiledKernelInfo> built = from_reply(*reply); !built.ok())
    return built.status();
  if (reply->program_binary().empty())
    return absl::UnimplementedError("the wide device keeps no program binaries");
  return std::move(*reply->mutable_program_binary());
}

}  // namespace kad::server::worker
