// The worker's side of the direct path (DESIGN §8, server/README.md): a
// client's shared-memory channel that kad has lent to the session's worker,
// which then serves the client's records itself, with kad out of the way —
// two parties to a synchronous launch instead of three, the only way to a
// launch within ~2 µs of the driver's on a small machine
// (bench/results/2026-12-05-wake-up-floor).
//
// The worker answers only what it can answer as kad would: a ping, a wait
// for launches it ran (every one has ended: each was synchronous), a copy
// between the arena and a buffer the plan names, within both, and a
// synchronous launch (kRun) like the one kad planned and handed over with
// the loan (DirectPlan: the same kernel, shape, arguments' kinds, buffers
// and local sizes; only the scalars' values differ, which change nothing
// kad checked). Anything else — another launch, a wait past them, another
// buffer, a record it cannot read, a full completion ring — it leaves in
// the ring and hands the channel back, as it does when kad recalls it; kad
// then serves it as before. The client sees one channel either way.
//
// The words kad reads (QueueProgress's loan_*) say how far the worker came,
// so that kad can go on from there, count the launches as the queue's, and
// answer the record in progress should the worker die. kad trusts them only
// as far as this session: they come from the session's own worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/sealed_memfd.h"
#include "server/shm_rings.h"
#include "server/worker/queue_progress.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {

// Whether `record` may be run as `key` was: the same in all but its tag and
// its scalars' values.
bool same_plan(const shm::v1::SubmitRecord& key, const shm::v1::SubmitRecord& record);

class ServedChannel {
 public:
  // The channel whose memfd came with kServeChannel; owns `fd`.
  static absl::StatusOr<std::unique_ptr<ServedChannel>> map(int fd);

  // Serves the channel from now on, as `loan` says, reporting on `progress`
  // (the queue's page, which kad set for the loan).
  void lend(const ServeChannelRecord& loan, QueueProgress* progress);
  bool serving() const { return serving_; }

  // Serves the records the client has written: pings, waits for what it
  // has launched, copies to and from the plan's buffers (`memory(id, end)`:
  // the worker's mapping of buffer `id`, null unless `end` bytes fit), and
  // launches like the plan's through `run` (which launches the record it
  // is given and returns once the launch has ended, with its failure if it
  // failed). Hands the channel back at anything else, or when kad recalls it.
  void serve(absl::FunctionRef<absl::Status(const LaunchRecord&)> run,
             absl::FunctionRef<std::byte*(uint64_t id, uint64_t end)> memory);

  // Whether the client wrote a record since the last look, or kad recalls
  // the channel: a reason not to sleep.
  bool has_work() const;
  // Whether the client spins while it waits (then so may the worker).
  bool client_spins() const;
  // For the worker's sleep: the word the client bumps when it writes a
  // record, its value now, and the flag that asks the worker to be woken.
  std::atomic<uint32_t>* tail_word() const { return &rings_->header().submit.tail; }
  uint32_t tail_seen() const { return rings_->positions().submit_head; }
  void set_sleeping(bool sleeping) const {
    rings_->header().submit.consumer_waiting.store(sleeping ? 1 : 0, std::memory_order_seq_cst);
  }

 private:
  explicit ServedChannel(SharedMapping memory) : memory_(std::move(memory)) {}
  // Gives the channel back to kad: the record that is next stays for it.
  void hand_back();
  // Serves record_ as a copy, if it is one the worker may serve: a range
  // inside the arena and inside a buffer of the plan.
  bool copy(absl::FunctionRef<std::byte*(uint64_t id, uint64_t end)> memory);

  SharedMapping memory_;
  std::optional<ChannelRings> rings_;
  QueueProgress* progress_ = nullptr;
  bool serving_ = false;
  uint64_t event_base_ = 0;
  DirectPlan plan_;
  shm::v1::SubmitRecord record_{};  // private copy of the record served
  LaunchRecord launch_;             // the plan's launch with the record's scalars
  CompletionBuilder completion_;
};

}  // namespace kad::server::worker
