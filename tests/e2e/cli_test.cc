// The daemon's and kactl's command lines, run as real processes: kactl's
// three commands (tables and --json), its address resolution and errors,
// kad's TOML configuration and its refusals, and grpc.health.v1.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/e2e/e2e.h"

namespace kad {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

struct ProcessRun {
  int code;
  std::string output;
};

// Runs a shell command; stdout and stderr together.
ProcessRun run(const std::string& command) {
  ProcessRun r{-1, {}};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class Cli : public testing::DaemonSuite {
 protected:
  std::string kactl(const std::string& args) {
    return std::string(KACTL_PATH) + " --connect " + daemon().unix_uri() + " " + args;
  }
  // A file for kactl to read, removed when the test ends.
  std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = "/tmp/kad-cli-" + std::to_string(getpid()) + "-" + name;
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : written_) std::filesystem::remove(path);
  }

 private:
  std::vector<std::string> written_;
};

TEST_F(Cli, KactlDevicesPrintsATableAndJson) {
  ProcessRun table = run(kactl("devices"));
  EXPECT_EQ(table.code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("opencl:pocl:0"));
  EXPECT_THAT(table.output, HasSubstr("(default)"));
  ProcessRun json = run(kactl("--json devices"));
  EXPECT_EQ(json.code, 0);
  EXPECT_THAT(json.output, MatchesRegex(R"(\[\{"id":"opencl:pocl:0",.*"default":true.*\}\]\s*)"));
}

TEST_F(Cli, KactlRunRunsAKernelFileAndSummarisesItsBuffers) {
  const std::string file = write_file("axpy.cl", R"(
kernel void axpy(KAD_CONTEXT, global float* y, float a, const global float* restrict x) {
  if (kad_active()) y[kad_global_linear()] += a * x[kad_global_linear()];
})");
  ProcessRun r = run(kactl("run " + file +
                           " --entry axpy --ndrange 100 --arg buf:float:100=1 --arg float:2 "
                           "--arg cbuf:float:100=i"));
  EXPECT_EQ(r.code, 0) << r.output;
  // y = 1 + 2 i: sum over 100 elements = 100 + 2 * 4950.
  EXPECT_THAT(r.output, HasSubstr("float[100]  sum 10000  [1 3 5 7 9 11 13 15 ...]"));
  EXPECT_THAT(r.output, HasSubstr("N-d grid, 32-bit indices"));
  ProcessRun json =
      run(kactl("--json run " + file +
                " --entry axpy --ndrange 4 --workgroup 2 --arg buf:float:4=1 --arg float:2 "
                "--arg cbuf:float:4=10*i"));
  EXPECT_EQ(json.code, 0) << json.output;
  EXPECT_THAT(json.output, HasSubstr(R"("workgroup":[2])"));
  EXPECT_THAT(json.output, HasSubstr(R"("first":[1,21,41,61])"));
}

TEST_F(Cli, KactlStatusCountsSessionsAndLaunches) {
  ProcessRun r = run(kactl("--json status"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, MatchesRegex(R"(\{"sessions":1,.*"devices":\[\{"id":"opencl:pocl:0".*)"));
  EXPECT_THAT(r.output, HasSubstr(R"("cache_failures":0,"cache_remembered_failures":0,)"));
  EXPECT_THAT(r.output, MatchesRegex(R"(.*"queue_depth":64,"contended_depth":[1-9][0-9]*,.*)"));
  ProcessRun table = run(kactl("status"));
  EXPECT_THAT(table.output,
              MatchesRegex(R"((.|\n)*opencl:pocl:0 +0 +0 +0 +0 +0/64, [1-9][0-9]*, 0, 0(.|\n)*)"));
  EXPECT_THAT(table.output,
              MatchesRegex(R"((.|\n)*cache      [0-9]+ entries of at most 4096, [0-9]+ of at )"
                           R"(most [0-9]+ bytes \(0 dropped, least )"
                           R"(recently used first\), [0-9]+ hits, [0-9]+ compilations, 0 )"
                           R"(failed \(0 launches refused from memory\)(.|\n)*)"));
  EXPECT_THAT(r.output, MatchesRegex(R"(.*"cache_evictions":0,"cache_max_entries":4096,)"
                                     R"("cache_bytes":[0-9]+,"cache_max_bytes":[1-9][0-9]*,.*)"));
}

TEST_F(Cli, KactlStatusShowsWhatConfinesTheWorkers) {
  // The daemon starts a spare worker at once; its walls are known when it is ready.
  ProcessRun json;
  for (int i = 0; i < 200; ++i) {
    json = run(kactl("--json status"));
    if (json.code != 0 || json.output.find(R"("workers_walls":"")") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(json.code, 0) << json.output;
  // Capabilities and seccomp hold on every kernel; Landlock's walls where it has them.
  EXPECT_THAT(json.output, MatchesRegex(R"(.*"workers_walls":"[^"]*capabilities, system calls.*)"));
  ProcessRun table = run(kactl("status"));
  EXPECT_THAT(table.output, HasSubstr("           confined by: "));
}

TEST_F(Cli, KactlFindsTheDaemonThroughKadAddress) {
  ProcessRun r = run("KAD_ADDRESS=" + daemon().tcp_uri() + " " + KACTL_PATH + " devices");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("opencl:pocl:0"));
}

TEST_F(Cli, KactlReportsErrorsClearly) {
  const std::string file =
      write_file("bad.cl", "kernel void k(KAD_CONTEXT, global int* x) { x[0] = nope; }");
  ProcessRun compile = run(kactl("run " + file + " --entry k --ndrange 4 --arg buf:int:4"));
  EXPECT_EQ(compile.code, 1);
  EXPECT_THAT(compile.output, HasSubstr("nope"));
  ProcessRun arg = run(kactl("run " + file + " --entry k --ndrange 4 --arg buf:quaternion:4"));
  EXPECT_EQ(arg.code, 1);
  EXPECT_THAT(arg.output, HasSubstr("unknown element type"));
  ProcessRun init = run(kactl("run " + file + " --entry k --ndrange 4 --arg buf:int:4=i*i"));
  EXPECT_THAT(init.output, HasSubstr("is not of the form a*i+b"));
  ProcessRun nowhere =
      run(std::string(KACTL_PATH) + " --connect unix:/tmp/kad-nowhere.sock devices");
  EXPECT_EQ(nowhere.code, 1);
  EXPECT_THAT(nowhere.output,
              HasSubstr("cannot open a session with kad at unix:/tmp/kad-nowhere.sock"));
}

TEST_F(Cli, TheDaemonServesGrpcHealth) {
  auto channel = grpc::CreateChannel(daemon().unix_uri(), grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, {}, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// `kactl health`: the probe of the container and of Kubernetes. SERVING is
// exit 0 and opens no session; a draining kad is NOT_SERVING, exit 1; a kad
// that is not there is exit 1 naming the address.
TEST(KactlHealth, ServingIsExitZeroWithoutASessionAndDrainingIsNotServing) {
  // The drain lasts as long as the test needs: it ends by SIGKILL.
  auto d = testing::Daemon::start({"--no-workers", "--drain-timeout", "60"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = std::string(KACTL_PATH) + " --connect " + (*d)->unix_uri();
  const std::string health = at + " health";
  for (int i = 0; i < 3; ++i) {
    ProcessRun serving = run(health);
    EXPECT_EQ(serving.code, 0) << serving.output;
    EXPECT_THAT(serving.output, HasSubstr("serves"));
  }
  // The status call is the first session this kad has seen.
  EXPECT_THAT(run(at + " --json status").output, HasSubstr(R"("sessions_opened":1,)"));

  // A kernel that spins keeps the drain going while health is asked.
  auto looper = Client::connect((*d)->unix_uri(), "looper");
  ASSERT_TRUE(looper.ok());
  auto q = (*looper)->create_queue();
  auto flag = (*looper)->allocate(sizeof(int32_t));
  auto m = (*looper)->load_module(
      "kernel void spin(KAD_CONTEXT, global volatile int* flag) {\n"
      "  if (kad_active()) { while (flag[0] == 0) { } }\n}\n");
  ASSERT_TRUE(q.ok() && flag.ok() && m.ok());
  auto k = (*looper)->get_kernel(*m, {.entry = "spin", .args = {client::ArgSpec::buffer()}});
  ASSERT_TRUE(k.ok()) << k.status();
  const client::Arg args[] = {client::Arg::buffer(*flag)};
  ASSERT_TRUE((*q)->launch(*k, client::Dims{1}, nullptr, args).ok());
  kill((*d)->pid(), SIGTERM);
  // Asked until kad has taken the signal in (it answers SERVING until then).
  ProcessRun draining = run(health + " --timeout 2");
  for (const absl::Time give_up = absl::Now() + absl::Seconds(30);
       draining.code == 0 && absl::Now() < give_up;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    draining = run(health + " --timeout 2");
  }
  EXPECT_EQ(draining.code, 1) << draining.output;
  EXPECT_THAT(draining.output, HasSubstr("is NOT_SERVING (draining)"));
  ProcessRun json = run(at + " --json health --timeout 2");
  EXPECT_EQ(json.code, 1);
  EXPECT_THAT(json.output, HasSubstr(R"({"serving":false,)"));
  (*d)->stop(SIGKILL);  // not waiting out the drain the spinning kernel holds

  ProcessRun nowhere =
      run(std::string(KACTL_PATH) + " --connect unix:/tmp/kad-nowhere.sock health --timeout 1");
  EXPECT_EQ(nowhere.code, 1);
  EXPECT_THAT(nowhere.output,
              HasSubstr("kad at unix:/tmp/kad-nowhere.sock cannot be asked whether it serves"));
}

TEST(KactlIdentity, KactlPresentsABearerTokenFromItsFlagOrTheEnvironment) {
  const std::string tokens = "/tmp/kad-cli-" + std::to_string(getpid()) + "-tokens";
  std::ofstream(tokens) << "kactl-token-0123456789abcdef ops\n";
  auto d = testing::Daemon::start({"--no-workers", "--tokens", tokens});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = std::string(KACTL_PATH) + " --connect " + (*d)->tcp_uri();
  ProcessRun flag = run(at + " --token kactl-token-0123456789abcdef devices");
  EXPECT_EQ(flag.code, 0) << flag.output;
  EXPECT_THAT(flag.output, HasSubstr("opencl:pocl:0"));
  ProcessRun env = run("KAD_TOKEN=kactl-token-0123456789abcdef " + at + " status");
  EXPECT_EQ(env.code, 0) << env.output;
  ProcessRun none = run(at + " devices");
  EXPECT_EQ(none.code, 1);
  EXPECT_THAT(none.output, HasSubstr("requires a bearer token on TCP"));
  ProcessRun wrong = run(at + " --token not-the-token-0123456789 devices");
  EXPECT_EQ(wrong.code, 1);
  EXPECT_THAT(wrong.output, HasSubstr("not one kad accepts"));
  std::filesystem::remove(tokens);
}

// DESIGN §8: on the UNIX socket a peer's uid (SO_PEERCRED) names its
// tenant. `kactl status` shows a tenant only its own use; kad's own user
// (root here) sees every tenant.
TEST(KactlIdentity, AUnixPeersUidNamesItsTenantWhichSeesOnlyItsOwnUse) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as a second uid";
  const std::string dir = "/tmp/kad-uid-tenant-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/kad.toml") << "[tenants.nobody-team]\nuids = [65534]\nqueues = 7\n";
  auto d = testing::Daemon::start(
      {"--no-workers", "--socket-mode", "0666", "--config", dir + "/kad.toml"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string socket = (*d)->unix_uri().substr(5);
  chmod(std::filesystem::path(socket).parent_path().c_str(), 0755);
  const std::string status =
      std::string(KACTL_PATH) + " --connect " + (*d)->unix_uri() + " --json status";
  ProcessRun nobody = run("setpriv --reuid=65534 --regid=65534 --clear-groups " + status);
  ASSERT_EQ(nobody.code, 0) << nobody.output;
  EXPECT_THAT(nobody.output, HasSubstr(R"("tenants":[{"name":"nobody-team")"));
  EXPECT_THAT(nobody.output, HasSubstr(R"({"quota":"sessions","device":"","used":1,)"));
  EXPECT_THAT(nobody.output, HasSubstr(R"({"quota":"queues","device":"","used":0,"limit":7})"));
  EXPECT_THAT(nobody.output, Not(HasSubstr(R"("name":"default")")));

  ProcessRun root = run(status);
  ASSERT_EQ(root.code, 0) << root.output;
  EXPECT_THAT(root.output, HasSubstr(R"("tenants":[{"name":"default")"));
  EXPECT_THAT(root.output, HasSubstr(R"("name":"nobody-team")"));
  std::filesystem::remove_all(dir);
}

// A config whose tenants kad cannot use stops it at start, naming the fault.
TEST(DaemonConfig, ATenantTableKadCannotUseStopsItNamingTheKey) {
  const std::string dir = "/tmp/kad-bad-tenants-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::pair<std::string, std::string> cases[] = {
      {"[tenants.a]\nqueuez = 3\n", "tenants.a.queuez is not a tenant setting"},
      {"[tenants.a]\nqueues = -1\n", "tenants.a.queues is -1; it must be 0 to"},
      {"[tenants.a]\nweight = 0\n", "tenants.a.weight is 0"},
      {"[tenants.a]\nsessions = \"many\"\n", "tenants.a.sessions must be an integer"},
      {"[tenants.a]\nuids = [7]\n[tenants.b]\nuids = [7]\n",
       "tenants.b.uids names uid 7, which tenant `a` has already"},
      {"[tenants.default]\nuids = [7]\n", "tenants.default.uids cannot be set"},
  };
  for (const auto& [toml, expected] : cases) {
    std::ofstream(dir + "/kad.toml") << toml;
    ProcessRun r = run(std::string(KAD_DAEMON_PATH) + " --no-workers --listen unix:" + dir +
                       "/kad.sock --config " + dir + "/kad.toml");
    EXPECT_EQ(r.code, 2) << toml << r.output;
    EXPECT_THAT(r.output, HasSubstr(expected)) << toml;
  }
  std::filesystem::remove_all(dir);
}

// A key kad does not know (a typo) stops it naming the key and its line;
// --check-config says whether kad would start, without starting it.
TEST(DaemonConfig, AnUnknownKeyStopsKadAndCheckConfigSaysWithoutStarting) {
  const std::string dir = "/tmp/kad-check-config-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string kad = std::string(KAD_DAEMON_PATH) + " --config " + dir + "/kad.toml";
  std::ofstream(dir + "/kad.toml") << "listen = [\"unix:" << dir << "/kad.sock\"]\n"
                                   << "max_sesions = 4\n";
  ProcessRun typo = run(kad);
  EXPECT_EQ(typo.code, 2);
  EXPECT_THAT(typo.output, HasSubstr("`max_sesions` is not a setting kad knows (line 2)"));
  ProcessRun typo_checked = run(kad + " --check-config");
  EXPECT_EQ(typo_checked.code, 2);
  // A file kad refuses, saying `why`.
  auto refused = [&](const std::string& toml, const std::string& why) {
    std::ofstream(dir + "/kad.toml") << toml;
    ProcessRun wrong = run(kad + " --check-config");
    EXPECT_EQ(wrong.code, 2) << toml;
    EXPECT_THAT(wrong.output, HasSubstr(why)) << toml;
  };
  for (const char* value : {"-1", "\"ten\"", "2.5"})
    refused(absl::StrCat("max_sessions = ", value, "\n"),
            "max_sessions must be a whole number, 0 or more");
  for (const char* value : {"-1", "\"many\""})
    refused(absl::StrCat("worker_max_processes = ", value, "\n"),
            "worker_max_processes must be a whole number, 0 or more");
  refused("worker_max_processes = 2000000\n",
          "worker_max_processes is 2000000, more than the maximum of 1048576");
  refused("device_queue_depth = 70000\n",
          "device_queue_depth is 70000, more than the maximum of 65536");
  // A worker uid past 2^31 - 65536 would give workers uids some tools read as negative.
  refused("worker_uid_base = 2147450881\n",
          "worker_uid_base is 2147450881, more than the maximum of 2147418112");
  refused("submit_streams = \"reactor\"\n",
          "submit_streams `reactor` is neither `threads` nor `reactors`");
  refused("pocl_worker_driver = \"fast\"\n",
          "pocl_worker_driver `fast` is neither `pthread` nor `basic`");
  refused("log_format = \"xml\"\n", "log_format `xml` is neither `text` nor `json`");
  refused("worker_malloc = \"jemalloc\"\n",
          "worker_malloc `jemalloc` is neither `glibc` nor `tcmalloc`");
  refused("worker_scope = \"tenant\"\n", "worker_scope `tenant` is neither `session` nor `device`");
  std::ofstream(dir + "/kad.toml") << "";
  ProcessRun unknown_driver_flag = run(kad + " --check-config --pocl-worker-driver cuda");
  EXPECT_NE(unknown_driver_flag.code, 0);
  EXPECT_THAT(unknown_driver_flag.output,
              HasSubstr("--pocl-worker-driver: cuda not in {pthread,basic}"));

  std::ofstream(dir + "/kad.toml") << "listen = [\"unix:" << dir << "/kad.sock\"]\n"
                                   << "max_sessions = 4\nlog_format = \"json\"\n"
                                   << "submit_streams = \"reactors\"\n"
                                   << "pocl_worker_driver = \"basic\"\n"
                                   << "worker_malloc = \"tcmalloc\"\n";
  ProcessRun ok = run(kad + " --check-config");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("kad.toml and the flags are valid"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/kad.sock")) << "--check-config started kad";
  std::filesystem::remove_all(dir);
}

TEST(DaemonConfig, ATomlFileSetsWhereKadListens) {
  const std::string dir = "/tmp/kad-config-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/kad.toml") << "listen = [\"unix:" << dir << "/from-toml.sock\"]\n"
                                   << "max_sessions = 4\n";
  const pid_t pid = testing::spawn(
      {KAD_DAEMON_PATH, "--config", dir + "/kad.toml", "--ready-file", dir + "/ready"});
  for (int i = 0; i < 3000 && !std::filesystem::exists(dir + "/ready"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::ifstream ready(dir + "/ready");
  std::string line;
  std::getline(ready, line);
  EXPECT_EQ(line, "unix:" + dir + "/from-toml.sock");
  auto c = Client::connect(line);
  EXPECT_TRUE(c.ok()) << c.status();
  c->reset();
  kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(pid), 0);
  std::filesystem::remove_all(dir);
}

// Every backend says in one line what it found: here the GPU backends find
// no hardware (or no library), and kad serves PoCL all the same. The log also
// names the kernel toolchain and where lowered GPU code is kept (--cache-dir).
TEST(DaemonStart, EachBackendReportsOneLineAndKadServesOnWithoutGpus) {
  const std::string dir = "/tmp/kad-start-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  // Stopped by SIGTERM after 4 s (a slow start still logs every line first):
  // kad drains and exits; `timeout` reports 124.
  ProcessRun start =
      run("timeout -s TERM 4 " + std::string(KAD_DAEMON_PATH) + " --listen unix:" + dir +
          "/kad.sock --cuda-prefer-blocks --cache-dir " + dir + "/code");
  EXPECT_EQ(start.code, 124) << start.output;
  for (const char* backend : {"cuda: ", "hsa: ", "level_zero: "}) {
    size_t lines = 0;
    for (size_t at = start.output.find(backend); at != std::string::npos;
         at = start.output.find(backend, at + 1)) {
      ++lines;
    }
    EXPECT_EQ(lines, 1u) << backend << " in:\n" << start.output;
  }
  EXPECT_THAT(start.output, HasSubstr("[default]"));  // the PoCL device serves
  EXPECT_THAT(start.output, HasSubstr("kernel toolchain: Debian clang version 15"));
  EXPECT_THAT(start.output, HasSubstr("code cache: " + dir + "/code"));
  EXPECT_THAT(start.output, HasSubstr("listening on unix:" + dir + "/kad.sock"));
  std::filesystem::remove_all(dir);
}

TEST(DaemonConfig, BadConfigurationIsRefusedWithAReason) {
  const std::string bad = "/tmp/kad-bad-" + std::to_string(getpid()) + ".toml";
  std::ofstream(bad) << "listen = [\"unix:/tmp/x.sock\"\n";
  ProcessRun toml = run(std::string(KAD_DAEMON_PATH) + " --config " + bad);
  EXPECT_EQ(toml.code, 2);
  EXPECT_THAT(toml.output, HasSubstr(bad));
  std::filesystem::remove(bad);
  ProcessRun scheme = run(std::string(KAD_DAEMON_PATH) + " --listen http://0.0.0.0:80");
  EXPECT_EQ(scheme.code, 2);
  EXPECT_THAT(scheme.output, HasSubstr("neither unix:PATH nor tcp://HOST:PORT"));
  ProcessRun open = run(std::string(KAD_DAEMON_PATH) + " --listen tcp://0.0.0.0:0");
  EXPECT_EQ(open.code, 2);
  EXPECT_THAT(open.output, HasSubstr("refusing plaintext TCP on tcp://0.0.0.0:0"));
}

}  // namespace
}  // namespace kad
