// Round trips through a chain of processes that hand a token on by futex
// (each sleeps until its word changes, after spinning for it a while): the
// floor of a synchronous launch's hand-offs through 2 parties (client <->
// worker), 3 in a ring (client -> kad -> worker -> client) and 3 there and
// back (client -> kad -> worker -> kad -> client, as kad does now).
//   chain PATH [SPIN | SPIN,SPIN,...]  (a spin per hop: the waiter's)
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct alignas(64) Word {
  std::atomic<uint32_t> v{0};
};
static void wait_change(std::atomic<uint32_t>* w, uint32_t seen, int spin) {
  for (int i = 0; i < spin; ++i)
    if (w->load(std::memory_order_acquire) != seen) return;
  while (w->load(std::memory_order_acquire) == seen)
    syscall(SYS_futex, w, FUTEX_WAIT, seen, nullptr, nullptr, 0);
}
static void bump(std::atomic<uint32_t>* w) {
  w->fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, w, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}
int main(int argc, char** argv) {
  // path: sequence of party indices a token visits, starting and ending at 0.
  std::vector<int> path;
  for (const char* p = argv[1]; *p; ++p) path.push_back(*p - '0');
  std::vector<int> spins;
  for (const char* p = argc > 2 ? argv[2] : "0"; *p;) {
    spins.push_back(atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  const int rounds = 200000;
  const int hops = path.size() - 1;
  while (static_cast<int>(spins.size()) < hops) spins.push_back(spins.back());
  auto spin_of = [&](int hop) { return spins[hop]; };
  auto* words = static_cast<Word*>(
      mmap(nullptr, 64 * 64, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  for (int i = 0; i < 64; ++i) new (&words[i]) Word();
  // hop h: party path[h] bumps words[h+1]; party path[h+1] waits on it.
  int parties = 0;
  for (int p : path) parties = std::max(parties, p + 1);
  std::vector<pid_t> kids;
  for (int me = 1; me < parties; ++me) {
    pid_t k = fork();
    if (k == 0) {
      std::vector<uint32_t> seen(hops + 1, 0);
      for (int r = 0; r < rounds; ++r)
        for (int h = 0; h < hops; ++h)
          if (path[h + 1] == me) {
            wait_change(&words[h + 1].v, seen[h + 1], spin_of(h));
            ++seen[h + 1];
            bump(&words[h + 2].v);
          }
      _exit(0);
    }
    kids.push_back(k);
  }
  std::vector<uint32_t> seen(hops + 2, 0);
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    bump(&words[1].v);
    for (int h = 1; h < hops; ++h)
      if (path[h + 1] == 0) {
        wait_change(&words[h + 1].v, seen[h + 1], spin_of(h));
        ++seen[h + 1];
        if (h + 1 < hops) bump(&words[h + 2].v);
      }
  }
  auto dt =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  printf("path %s spins %s: %.2f us per round trip (%d hand-offs)\n", argv[1],
         argc > 2 ? argv[2] : "0", dt / rounds, hops);
}
