// Threads that run the queue commands of Submit streams (issue 13).
//
// A Submit stream is a reactor on gRPC's callback threads, which must never
// block: a command that waits (a wait, a run, a copy after launches, a
// launch that compiles) would stall every other call those threads serve.
// So each command runs here, on a thread of the pool, which writes its
// reply. A stream holds a thread only while one of its commands runs: an
// idle stream holds none, where the sync API held two per stream.
//
// The pool grows when every thread is busy (a command that blocks must
// never wait for another stream's to end) and shrinks as threads stay idle.
// Posting allocates nothing: a task is the caller's, linked in place.
#pragma once

#include <cstddef>
#include <list>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kad::server {

class CommandPool {
 public:
  // What the pool runs: the caller's object, posted again only once run()
  // has been called for the last post.
  class Task {
   public:
    virtual void run() = 0;

   protected:
    ~Task() = default;

   private:
    friend class CommandPool;
    Task* next_ = nullptr;
  };

  // A thread idle for `idle_exit` ends, down to `keep` threads.
  explicit CommandPool(size_t keep = 2, absl::Duration idle_exit = absl::Seconds(10));
  // Runs what was posted, then ends every thread.
  ~CommandPool();
  CommandPool(const CommandPool&) = delete;
  CommandPool& operator=(const CommandPool&) = delete;

  // Runs `task` on a thread of the pool, soon: on an idle one, or on a new one.
  void post(Task* task);

  struct Stats {
    size_t threads = 0;  // running now
    size_t idle = 0;     // of them, waiting for a task
    size_t started = 0;  // ever
  };
  Stats stats() const;

 private:
  void serve(std::list<std::thread>::iterator self);
  bool has_task_or_stopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return head_ != nullptr || stopping_;
  }

  const size_t keep_;
  const absl::Duration idle_exit_;
  mutable absl::Mutex mu_;
  Task* head_ ABSL_GUARDED_BY(mu_) = nullptr;  // posted and not yet taken, in order
  Task* tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // how many
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  size_t started_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Every thread; one that ended is joined when the next starts, or at the end.
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::list<std::thread>::iterator> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kad::server
