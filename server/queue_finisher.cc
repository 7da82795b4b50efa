#include "server/queue_finisher.h"

namespace kad::server {

QueueFinisher::~QueueFinisher() {
  stopping_.store(true);
  absl::MutexLock lock(&mu_);
  for (Job& job : jobs_) job.thread.join();
}

std::shared_ptr<absl::Notification> QueueFinisher::start_locked(
    std::vector<std::shared_ptr<SessionQueue>> queues, std::shared_ptr<void> keep) {
  // Jobs that ended are joined here: threads do not pile up.
  std::erase_if(jobs_, [](Job& job) {
    if (!job.done->HasBeenNotified()) return false;
    job.thread.join();
    return true;
  });
  auto done = std::make_shared<absl::Notification>();
  jobs_.push_back(
      {std::thread([queues = std::move(queues), keep = std::move(keep), done]() mutable {
         for (const auto& q : queues) q->queue->finish().IgnoreError();
         queues.clear();
         keep.reset();
         done->Notify();
       }),
       done});
  return done;
}

bool QueueFinisher::finish(std::vector<std::shared_ptr<SessionQueue>> queues,
                           std::shared_ptr<void> keep, absl::Duration timeout) {
  if (queues.empty()) return true;  // nothing can still use what `keep` holds: it goes here
  std::shared_ptr<absl::Notification> done;
  {
    absl::MutexLock lock(&mu_);
    done = start_locked(std::move(queues), std::move(keep));
  }
  return done->WaitForNotificationWithTimeout(timeout);
}

void QueueFinisher::finish_detached(std::vector<std::shared_ptr<SessionQueue>> queues,
                                    std::shared_ptr<void> keep, absl::Duration timeout,
                                    std::function<void()> late) {
  absl::MutexLock lock(&mu_);
  const bool can_run_late = !queues.empty();  // without queues, nothing can run late
  std::shared_ptr<absl::Notification> finished = start_locked(std::move(queues), std::move(keep));
  if (!can_run_late) return;
  auto watched = std::make_shared<absl::Notification>();
  jobs_.push_back({std::thread([this, finished, watched, timeout, late = std::move(late)] {
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
                   }),
                   watched});
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
