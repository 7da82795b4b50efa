// Reading a real kad's --metrics page in the end-to-end tests.
#pragma once

#include <httplib.h>

#include <string>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"

namespace kad::testing {

// The page at `url` (http://HOST:PORT/metrics), checked for its status and
// content type; what went wrong instead where it could not be fetched.
inline std::string scrape(const std::string& url) {
  const std::string hostport = url.substr(7, url.find('/', 7) - 7);
  httplib::Client http("http://" + hostport);
  auto r = http.Get("/metrics");
  if (!r) return "scrape failed: " + httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"),
              ::testing::HasSubstr("text/plain; version=0.0.4"));
  return r->body;
}

// The value of one series (`name{labels}` exactly as kad writes it); -1
// when it is not on the page.
inline double value_of(const std::string& page, const std::string& series) {
  const std::string prefix = "\n" + series + " ";
  const size_t at = page.find(prefix);
  if (at == std::string::npos) return -1;
  const size_t start = at + prefix.size();
  double v = -1;
  if (!absl::SimpleAtod(page.substr(start, page.find('\n', start) - start), &v)) return -1;
  return v;
}

}  // namespace kad::testing
