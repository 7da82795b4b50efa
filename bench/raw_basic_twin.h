// raw-basic/: the raw/ cases that kad's workers compare with, run on PoCL's
// `basic` driver, beside raw/ on PoCL's default device (`pthread`) in the
// same run. kad's workers run PoCL's CPU device on `basic` (a kernel runs
// inside its enqueue, with no hand-off to a pool of threads), so raw/ on
// `pthread` alone flatters them: a worker mode can beat it by not paying
// that hand-off, not by costing less than the driver (bench/results/
// 2026-12-04-same-day-checks). PoCL reads POCL_DEVICES once per process,
// so each case runs in a child kad_bench that PoCL starts on `basic`.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kad_bench {

// What the child's Google Benchmark reported for its one case.
struct TwinResult {
  double seconds_per_iteration = 0;
  double items_per_second = 0;  // 0: the case reports none
  std::string device_name;      // the child's device, as PoCL names it
};

// Runs the raw/ case named `raw_case` (its name after "raw/", without the
// "/real_time" suffix) in a child `self` (kad_bench) with POCL_DEVICES=basic,
// passing `min_time_flag` (the parent's --benchmark_min_time=..., or empty).
// The error names the case and the child's log where it failed.
absl::StatusOr<TwinResult> run_raw_case_on_basic(const std::string& self,
                                                 const std::string& raw_case,
                                                 const std::string& min_time_flag);

}  // namespace kad_bench
