// The worker's side of the direct path (DESIGN §8, server/README.md): a
// client's shared-memory channel that kad has lent to the session's worker,
// which then serves the client's records itself, with kad out of the way —
// two parties to a synchronous launch instead of three, the only way to a
// launch within ~2 µs of the driver's on a small machine
// (bench/results/2026-12-05-wake-up-floor).
//
// The worker answers only what it can answer as kad would: a ping, a wait
// for launches it ran, a copy between the arena and a buffer the plan
// names, within both, and a launch like the one kad planned and handed over
// with the loan (DirectPlan: the same kernel, shape, arguments' kinds,
// buffers and local sizes; only the scalars' values differ, which change
// nothing kad checked), synchronous (kRun) or pipelined (kSubmit: launched
// and not waited for; a failure is reported by the next wait that covers
// it, as kad reports it). Anything else — another launch, a wait past
// them, another buffer, a record it cannot read, a full completion ring —
// it leaves in the ring and hands the channel back, as it does when kad
// recalls it; kad then serves it as before. Before it hands the channel
// back, the worker waits for its launches to end (kad, watching their
// progress, holds it to their deadline), so that kad takes back a queue
// with nothing in flight; a failure among them that no wait reported stays
// with the worker's queue for kad's next wait to ask for. The client sees
// one channel either way.
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/sealed_memfd.h"
#include "server/shm_rings.h"
#include "server/worker/queue_progress.h"
#include "server/worker/worker_protocol.h"

namespace kad::server::worker {

// Whether `record` may be run as `key` was: the same in all but its tag,
// its scalars' values and whether it is waited for (kRun or kSubmit).
bool same_plan(const shm::v1::SubmitRecord& key, const shm::v1::SubmitRecord& record);

// The lent channel's queue, in the worker. Launches count from 1 for the
// loan: the first the worker ran for it is 1.
class LentQueue {
 public:
  virtual ~LentQueue() = default;
  // Launches `launch` (the loan's next) and returns, whether or not it has ended.
  virtual void submit(const LaunchRecord& launch) = 0;
  // Returns once the loan's launches up to `n` have ended (0: at once).
  // With `report`, the first failure of the queue's launches up to there,
  // which is then reported and forgotten; without, nothing is taken.
  virtual absl::Status wait(uint64_t n, bool report) = 0;
  // The worker's mapping of buffer `id`, or null unless `end` bytes fit in it.
  virtual std::byte* memory(uint64_t id, uint64_t end) = 0;
};

class ServedChannel {
 public:
  // The channel whose memfd came with kServeChannel; owns `fd`.
  static absl::StatusOr<std::unique_ptr<ServedChannel>> map(int fd);

  // Serves the channel from now on, as `loan` says, reporting on `progress`
  // (the queue's page, which kad set for the loan).
  void lend(const ServeChannelRecord& loan, QueueProgress* progress);
  bool serving() const { return serving_; }

  // Serves the records the client has written, on `queue`: pings, waits
  // for what it has launched, copies to and from the plan's buffers, and
  // launches like the plan's. Hands the channel back at anything else, or
  // when kad recalls it.
  void serve(LentQueue& queue);

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
  // Gives the channel back to kad once the loan's launches have ended: the
  // record that is next stays for it.
  void hand_back(LentQueue& queue);
  // Serves record_ as a copy, if it is one the worker may serve: a range
  // inside the arena and inside a buffer of the plan.
  bool copy(LentQueue& queue);
  // Says the record at the ring's head is being taken (as `what`), then
  // takes it: from the store of the head on, it is the worker's to answer.
  void take(LoanTaking what);
  // The plan's launch, with record_'s scalars, in launch_.
  void set_scalars();

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
