// The Prometheus page on its own: label values escaped so that a tenant
// name the operator wrote with quotes, backslashes or a newline cannot break
// the page or forge a series, and the histogram's buckets cumulative.
#include "server/metrics_exposition.h"

#include "gmock/gmock.h"

namespace kad::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsExposition, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(prometheus_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(prometheus_label_value("plain-name_1"), "plain-name_1");
}

TEST(MetricsExposition, ATenantNameCannotForgeASeriesAndBucketsAreCumulative) {
  EngineCounters c;
  EngineCounters::TenantUse& t = c.tenants.emplace_back();
  t.name = "evil\"} 1\nkad_sessions 999\n#";
  t.uses.push_back({"queues", "", 3, 8, 2});
  EngineCounters::PerDevice& d = c.devices.emplace_back();
  d.id = "opencl:pocl:0";
  LatencyHistogram h;
  h.record(5'000);           // 5 µs: the first bucket
  h.record(3'000'000);       // 3 ms: the 5 ms bucket
  h.record(60'000'000'000);  // a minute: past every bound
  d.launch_latency = h.snapshot();
  RequestCounters requests;
  const std::string page = prometheus_text(c, requests);
  EXPECT_THAT(page, Not(HasSubstr("\nkad_sessions 999")));
  EXPECT_THAT(page, HasSubstr("kad_tenant_quota_used{tenant=\"evil\\\"} 1\\nkad_sessions 999\\n#\","
                              "quota=\"queues\"} 3\n"));
  EXPECT_THAT(page, HasSubstr("kad_quota_refusals_total{tenant=\"evil"));
  const std::string bucket = "kad_launch_latency_seconds_bucket{device=\"opencl:pocl:0\",le=";
  EXPECT_THAT(page, HasSubstr(bucket + "\"1e-05\"} 1\n"));
  EXPECT_THAT(page, HasSubstr(bucket + "\"0.0025\"} 1\n"));
  EXPECT_THAT(page, HasSubstr(bucket + "\"0.005\"} 2\n"));
  EXPECT_THAT(page, HasSubstr(bucket + "\"10\"} 2\n"));
  EXPECT_THAT(page, HasSubstr(bucket + "\"+Inf\"} 3\n"));
  EXPECT_THAT(page, HasSubstr("kad_launch_latency_seconds_count{device=\"opencl:pocl:0\"} 3\n"));
  EXPECT_THAT(page,
              HasSubstr("kad_launch_latency_seconds_sum{device=\"opencl:pocl:0\"} 60.003005\n"));
}

// Builds for the wide device, by where they came from.
TEST(MetricsExposition, WideBuildsAreCountedBySource) {
  EngineCounters c;
  c.workers.wide_built = 2;
  c.workers.wide_from_cache = 5;
  c.workers.wide_failed = 1;
  RequestCounters requests;
  const std::string page = prometheus_text(c, requests);
  EXPECT_THAT(page, HasSubstr("# TYPE kad_worker_wide_builds_total counter\n"));
  EXPECT_THAT(page, HasSubstr("kad_worker_wide_builds_total{source=\"built\"} 2\n"));
  EXPECT_THAT(page, HasSubstr("kad_worker_wide_builds_total{source=\"code_cache\"} 5\n"));
  EXPECT_THAT(page, HasSubstr("kad_worker_wide_builds_total{source=\"failed\"} 1\n"));
}

TEST(MetricsExposition, LoanEndsAreCountedByReasonEachOnItsOwnLine) {
  EngineCounters c;
  for (size_t i = 0; i < kLoanEnds; ++i) c.loan_ends[i] = 10 + i;
  RequestCounters requests;
  const std::string page = prometheus_text(c, requests);
  EXPECT_THAT(page, HasSubstr("# TYPE kad_channel_loan_ends_total counter\n"));
  const char* names[] = {"handed_back",    "contention",  "held",
                         "session_closed", "client_gone", "draining",
                         "deadline",       "worker_lost", "stopping"};
  ASSERT_EQ(std::size(names), kLoanEnds);
  for (size_t i = 0; i < kLoanEnds; ++i) {
    EXPECT_THAT(page, HasSubstr("kad_channel_loan_ends_total{reason=\"" + std::string(names[i]) +
                                "\"} " + std::to_string(10 + i) + "\n"));
  }
}

}  // namespace
}  // namespace kad::server
