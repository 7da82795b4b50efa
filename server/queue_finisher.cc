#include "server/queue_finisher.h"

#include <system_error>

namespace kad::server {

QueueFinisher::~QueueFinisher() {
  stopping_.store(true);
  absl::MutexLock lock(&mu_);
  for (Job& job : jobs_) job.thread.join();
}

void QueueFinisher::Work::run() {
  for (const auto& q : queues) q->queue->finish().IgnoreError();
  queues.clear();
  keep.reset();  // only once the queues finished: their launches may use it
  done->Notify();
}

bool QueueFinisher::start_locked(const std::shared_ptr<Work>& work) {
  // Jobs that ended are joined here: threads do not pile up.
  std::erase_if(jobs_, [](Job& job) {
    if (!job.done->HasBeenNotified()) return false;
    job.thread.join();
    return true;
  });
  try {
    jobs_.push_back({std::thread([work] { work->run(); }), work->done});
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

bool QueueFinisher::finish(std::vector<std::shared_ptr<SessionQueue>> queues,
                           std::shared_ptr<void> keep, absl::Duration timeout) {
  if (queues.empty()) return true;  // nothing can still use what `keep` holds: it goes here
  auto work = std::make_shared<Work>(Work{std::move(queues), std::move(keep)});
  bool started;
  {
    absl::MutexLock lock(&mu_);
    started = start_locked(work);
  }
  if (!started) work->run();  // no thread to be had: this caller waits, unbounded
  return work->done->WaitForNotificationWithTimeout(timeout);
}

void QueueFinisher::finish_detached(std::vector<std::shared_ptr<SessionQueue>> queues,
                                    std::shared_ptr<void> keep, absl::Duration timeout,
                                    std::function<void()> late) {
  const bool can_run_late = !queues.empty();  // without queues, nothing can run late
  auto work = std::make_shared<Work>(Work{std::move(queues), std::move(keep)});
  bool started;
  {
    absl::MutexLock lock(&mu_);
    started = start_locked(work);
    if (started && can_run_late) {
      auto watched = std::make_shared<absl::Notification>();
      auto watch = [this, finished = work->done, watched, timeout, late = std::move(late)] {
        // In steps, so that a finisher that stops need not wait the whole timeout.
        const absl::Time deadline = absl::Now() + timeout;
        while (!finished->WaitForNotificationWithTimeout(absl::Milliseconds(50)) &&
               !stopping_.load()) {
          if (absl::Now() >= deadline) {
            late();
            break;
          }
        }
        watched->Notify();
      };
      try {
        jobs_.push_back({std::thread(std::move(watch)), watched});
      } catch (const std::system_error&) {
        // No thread to be had: what still runs late goes unreported.
      }
    }
  }
  // No thread to be had: this caller waits, unbounded, rather than kad going down.
  if (!started) work->run();
}

bool QueueFinisher::wait_all(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::shared_ptr<absl::Notification>> pending;
  {
    absl::MutexLock lock(&mu_);
    for (const Job& job : jobs_) pending.push_back(job.done);
  }
  for (const auto& done : pending)
    if (!done->WaitForNotificationWithDeadline(deadline)) return false;
  return true;
}

}  // namespace kad::server
