// --log-format json (DESIGN §10): every line kad prints, serving a launch, is
// one JSON object, whatever bytes the text carries (a socket path with
// quotes, backslashes and a byte that is not UTF-8).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using testing::read_file;

TEST(JsonLogs, EveryLineKadPrintsIsOneJsonObjectEvenForHostileBytes) {
  char name[] = "/tmp/kad-json-XXXXXX";
  const std::string dir = mkdtemp(name);
  const std::string odd = dir + "/q\"b\\s\xff";  // a quote, a backslash, not UTF-8
  std::filesystem::create_directories(odd);
  const std::string ready = dir + "/ready";
  const pid_t kad = testing::spawn({KAD_DAEMON_PATH, "--log-format", "json", "--listen",
                                    "unix:" + odd + "/kad.sock", "--ready-file", ready},
                                   dir + "/kad.log");
  ASSERT_GT(kad, 0);
  for (int i = 0; i < 3000 && !std::filesystem::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready)) << read_file(dir + "/kad.log");
  testing::expect_bystander_served("unix:" + odd + "/kad.sock");  // a launch through a worker
  kill(kad, SIGTERM);
  EXPECT_EQ(testing::wait_exit(kad), 0);

  std::istringstream lines(read_file(dir + "/kad.log"));
  std::string line;
  int count = 0;
  bool listening = false;
  while (std::getline(lines, line)) {
    ++count;
    const nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(object.is_object()) << "not one JSON object: " << line;
    for (const char* key : {"time", "level", "process", "pid", "message"})
      EXPECT_TRUE(object.contains(key)) << key << " missing: " << line;
    EXPECT_THAT(object["time"].get<std::string>(),
                ::testing::MatchesRegex("20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:.]+Z"));
    const std::string message = object["message"].get<std::string>();
    // The path comes back whole, its bad byte as U+FFFD.
    if (message == "listening on unix:" + dir + "/q\"b\\s\xEF\xBF\xBD/kad.sock") listening = true;
  }
  EXPECT_GT(count, 3);
  EXPECT_TRUE(listening) << read_file(dir + "/kad.log");
  std::filesystem::remove_all(dir);
}

TEST(JsonLogs, ALogFormatKadDoesNotKnowStopsItNamingTheValue) {
  char name[] = "/tmp/kad-json-XXXXXX";
  const std::string dir = mkdtemp(name);
  std::ofstream(dir + "/kad.toml") << "log_format = \"xml\"\n";
  const pid_t kad = testing::spawn(
      {KAD_DAEMON_PATH, "--listen", "unix:" + dir + "/kad.sock", "--config", dir + "/kad.toml"},
      dir + "/kad.log");
  EXPECT_EQ(testing::wait_exit(kad), 2);
  EXPECT_THAT(read_file(dir + "/kad.log"),
              HasSubstr("log_format `xml` is neither `text` nor `json`"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kad
