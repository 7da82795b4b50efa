#include "server/queue_finisher.h"

namespace kad::server {

QueueFinisher::~QueueFinisher() {
  absl::MutexLock lock(&mu_);
  for (Job& job : jobs_) job.thread.join();
}

bool QueueFinisher::finish(std::vector<std::shared_ptr<SessionQueue>> queues,
                           std::shared_ptr<void> keep, absl::Duration timeout) {
  if (queues.empty()) return true;  // nothing can still use what `keep` holds: it goes here
  auto done = std::make_shared<absl::Notification>();
  {
    absl::MutexLock lock(&mu_);
    // Jobs that ended are joined here: threads do not pile up.
    std::erase_if(jobs_, [](Job& job) {
      if (!job.done->HasBeenNotified()) return false;
      job.thread.join();
      return true;
    });
    jobs_.push_back(
        {std::thread([queues = std::move(queues), keep = std::move(keep), done]() mutable {
           for (const auto& q : queues) q->queue->finish().IgnoreError();
           queues.clear();
           keep.reset();
           done->Notify();
         }),
         done});
  }
  return done->WaitForNotificationWithTimeout(timeout);
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
