// Waiting for a device with a bound (DESIGN §8: closing a session, freeing
// memory and SIGTERM never wait forever). A driver's finish() cannot be
// interrupted, and a client's kernel may never end: the finish runs on a
// thread of its own, holding whatever must outlive the work (the session's
// buffers and queues), and the caller waits only as long as it may. What is
// still running past that is released when the device finishes — for a kernel
// that loops forever, when the process ends.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/session.h"

namespace kad::server {

class QueueFinisher {
 public:
  // Starts a thread that runs a function: std::thread's constructor, which
  // throws std::system_error when the process can have no more threads.
  using StartThread = std::function<std::thread(std::function<void()>)>;
  static std::thread start_thread(std::function<void()> run) { return std::thread(std::move(run)); }

  // Starts the backlog's thread (see backlog_); later threads come from
  // `start` (tests give one that fails, as a process at its limit does).
  explicit QueueFinisher(StartThread start = start_thread);
  QueueFinisher(const QueueFinisher&) = delete;
  QueueFinisher& operator=(const QueueFinisher&) = delete;
  // Waits for every finish still running: only once no kernel can loop
  // (the daemon exits without it after a drain that timed out).
  ~QueueFinisher();

  // Finishes `queues`, then drops `keep` (destroyed on the finishing thread
  // if it holds the last reference). True when done within `timeout`.
  bool finish(std::vector<std::shared_ptr<SessionQueue>> queues, std::shared_ptr<void> keep,
              absl::Duration timeout);
  // The same, with nobody waiting: the finish and the drop run on threads
  // of the finisher's, and `late` runs on one if the finish has not ended
  // within `timeout`. For callers that must not block (gRPC's callback
  // threads, which every session's stream shares).
  void finish_detached(std::vector<std::shared_ptr<SessionQueue>> queues,
                       std::shared_ptr<void> keep, absl::Duration timeout,
                       std::function<void()> late);
  // Waits for every finish started so far (a closed session's, say), at
  // most `timeout`; true when none still runs.
  bool wait_all(absl::Duration timeout);

 private:
  struct Job {
    std::thread thread;
    std::shared_ptr<absl::Notification> done;
  };
  // Finishes the queues, then drops what they may use.
  struct Work {
    std::vector<std::shared_ptr<SessionQueue>> queues;
    std::shared_ptr<void> keep;
    std::shared_ptr<absl::Notification> done = std::make_shared<absl::Notification>();
    void run();
  };
  // Starts a thread that runs `work`, or, when no thread can be had, puts
  // it on the backlog. Never runs it on the caller's thread: a kernel that
  // loops would hold that thread (gRPC's, or main's drain) for good.
  void start_locked(const std::shared_ptr<Work>& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void serve_backlog();
  bool backlog_has_work_or_stops() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !backlog_.empty() || backlog_stops_;
  }
  const StartThread start_;
  absl::Mutex mu_;
  std::atomic<bool> stopping_{false};  // late-watchers stop waiting
  std::vector<Job> jobs_ ABSL_GUARDED_BY(mu_);
  // Work for which no thread of its own could be started (the process is at
  // its thread limit), run in order by one thread made with the finisher.
  // A looping kernel there holds up the work behind it, never a caller.
  std::deque<std::shared_ptr<Work>> backlog_ ABSL_GUARDED_BY(mu_);
  bool backlog_stops_ ABSL_GUARDED_BY(mu_) = false;  // the finisher goes: once it is empty
  std::thread backlog_thread_;
};

}  // namespace kad::server
