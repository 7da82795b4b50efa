#include "server/queue_finisher.h"

#include <system_error>

namespace kad::server {

QueueFinisher::QueueFinisher(StartThread start)
    : start_(std::move(start)), backlog_thread_([this] { serve_backlog(); }) {}

QueueFinisher::~QueueFinisher() {
  stopping_.store(true);
  {
    absl::MutexLock lock(&mu_);
    backlog_stops_ = true;
  }
  backlog_thread_.join();  // after the backlog's work: it stops only when none is left
  absl::MutexLock lock(&mu_);
  for (Job& job : jobs_) job.thread.join();
}

void QueueFinisher::serve_backlog() {
  for (;;) {
    std::shared_ptr<Work> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &QueueFinisher::backlog_has_work_or_stops));
      if (backlog_.empty()) return;  // stopping, and nothing left
      work = backlog_.front();       // it stays listed while it runs, for wait_all
    }
    work->run();
    absl::MutexLock lock(&mu_);
    backlog_.pop_front();
  }
}

void QueueFinisher::Work::run() {
  for (const auto& q : queues) q->queue->finish().IgnoreError();
  queues.clear();
  keep.reset();  // only once the queues finished: their launches may use it
  done->Notify();
}

void QueueFinisher::start_locked(const std::shared_ptr<Work>& work) {
  // Jobs that ended are joined here: threads do not pile up.
  std::erase_if(jobs_, [](Job& job) {
    if (!job.done->HasBeenNotified()) return false;
    job.thread.join();
    return true;
  });
  try {
    jobs_.reserve(jobs_.size() + 1);  // a thread that started is never dropped unjoined
    jobs_.push_back({start_([work] { work->run(); }), work->done});
  } catch (const std::exception&) {  // std::system_error: no thread to be had
    backlog_.push_back(work);
  }
}

bool QueueFinisher::finish(std::vector<std::shared_ptr<SessionQueue>> queues,
                           std::shared_ptr<void> keep, absl::Duration timeout) {
  if (queues.empty()) return true;  // nothing can still use what `keep` holds: it goes here
  auto work = std::make_shared<Work>(Work{std::move(queues), std::move(keep)});
  {
    absl::MutexLock lock(&mu_);
    start_locked(work);
  }
  return work->done->WaitForNotificationWithTimeout(timeout);
}

void QueueFinisher::finish_detached(std::vector<std::shared_ptr<SessionQueue>> queues,
                                    std::shared_ptr<void> keep, absl::Duration timeout,
                                    std::function<void()> late) {
  const bool can_run_late = !queues.empty();  // without queues, nothing can run late
  auto work = std::make_shared<Work>(Work{std::move(queues), std::move(keep)});
  {
    absl::MutexLock lock(&mu_);
    start_locked(work);
    if (can_run_late) {
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
        jobs_.reserve(jobs_.size() + 1);
        jobs_.push_back({start_(std::move(watch)), watched});
      } catch (const std::exception&) {
        // No thread to be had: what still runs late goes unreported.
      }
    }
  }
}

bool QueueFinisher::wait_all(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::shared_ptr<absl::Notification>> pending;
  {
    absl::MutexLock lock(&mu_);
    for (const Job& job : jobs_) pending.push_back(job.done);
    for (const auto& work : backlog_) pending.push_back(work->done);
  }
  for (const auto& done : pending)
    if (!done->WaitForNotificationWithDeadline(deadline)) return false;
  return true;
}

}  // namespace kad::server
