#include "server/command_pool.h"

#include <system_error>

#include "spdlog/spdlog.h"

namespace kad::server {

CommandPool::CommandPool(size_t keep, absl::Duration idle_exit)
    : keep_(keep), idle_exit_(idle_exit) {}

CommandPool::~CommandPool() {
  std::list<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Every thread runs what is posted before it ends.
    mu_.Await(absl::Condition(
        +[](CommandPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return p->threads_.size() == p->ended_.size();
        },
        this));
    threads.swap(threads_);
    ended_.clear();
  }
  for (std::thread& t : threads) t.join();
}

void CommandPool::post(Task* task) {
  std::list<std::thread> ended;  // joined once mu_ is released
  {
    absl::MutexLock lock(&mu_);
    task->next_ = nullptr;
    if (tail_ != nullptr) {
      tail_->next_ = task;
    } else {
      head_ = task;
    }
    tail_ = task;
    ++pending_;
    if (pending_ <= idle_ || stopping_) return;  // an idle thread takes it
    // Every thread is busy: one more, so that a task never waits for another
    // to end (it may block for as long as a launch's deadline).
    for (const auto& t : ended_) ended.splice(ended.end(), threads_, t);
    ended_.clear();
    threads_.emplace_back();
    const auto self = std::prev(threads_.end());
    try {
      *self = std::thread([this, self] { serve(self); });
      ++started_;
    } catch (const std::system_error& e) {
      // No thread to be had (the process's limit): the task waits for a
      // busy one, as on a pool of fixed size.
      threads_.erase(self);
      spdlog::warn("kad could not start a thread for queue commands ({}); {} run now", e.what(),
                   threads_.size() - ended_.size());
    }
  }
  for (std::thread& t : ended) t.join();
}

void CommandPool::serve(std::list<std::thread>::iterator self) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    ++idle_;
    const bool woken =
        mu_.AwaitWithTimeout(absl::Condition(this, &CommandPool::has_task_or_stopping), idle_exit_);
    --idle_;
    if (head_ == nullptr) {
      // Idle too long (a few threads stay), or the pool ends.
      if (stopping_ || (!woken && threads_.size() - ended_.size() > keep_)) break;
      continue;
    }
    Task* task = head_;
    head_ = task->next_;
    if (head_ == nullptr) tail_ = nullptr;
    --pending_;
    mu_.Unlock();
    task->run();  // may post itself again
    mu_.Lock();
  }
  ended_.push_back(self);
}

CommandPool::Stats CommandPool::stats() const {
  absl::MutexLock lock(&mu_);
  return {threads_.size() - ended_.size(), idle_, started_};
}

}  // namespace kad::server
