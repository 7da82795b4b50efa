// Launch latencies on one device, for --metrics: how long from kad
// accepting a launch to kad learning that it ended (a wait, or the queue's
// pump that frees device slots), in fixed buckets. Recording is a few
// relaxed atomic adds: no lock, no allocation on the launch path.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace kad::server {

class LatencyHistogram {
 public:
  // Upper bounds of the buckets, in seconds; one more bucket holds the rest.
  static constexpr std::array<double, 19> kBounds = {
      10e-6, 25e-6, 50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
      25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,      2.5,  5,      10};

  struct Snapshot {
    std::array<uint64_t, kBounds.size() + 1> counts{};  // per bucket, not cumulative
    uint64_t count = 0;
    double sum_seconds = 0;
  };

  void record(int64_t ns) {
    if (ns < 0) ns = 0;
    const double seconds = static_cast<double>(ns) * 1e-9;
    size_t b = 0;
    while (b < kBounds.size() && seconds > kBounds[b]) ++b;
    counts_[b].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }

  Snapshot snapshot() const {
    Snapshot s;
    for (size_t b = 0; b < counts_.size(); ++b) {
      s.counts[b] = counts_[b].load(std::memory_order_relaxed);
      s.count += s.counts[b];
    }
    s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return s;
  }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace kad::server
