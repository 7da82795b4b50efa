// What a test can learn from outside about a worker process kad started.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kad::testing {

// The worker's own folder (its --worker-dir), "" if it has none or is gone.
std::string worker_dir_of(pid_t pid);
// That folder as the worker sees it, through its mount namespace, where a
// tmpfs of its own covers it (namespaced_spawn.h): "/proc/PID/root/DIR".
std::string worker_folder_inside(pid_t pid);

// The whole of a /proc file, "" if it cannot be read: a process that ends
// meanwhile makes the read fail (ESRCH), which a stream iterator throws.
std::string read_proc_file(const std::string& path);

// The processes whose parent is `parent`: a kad's workers.
std::vector<pid_t> children_of(pid_t parent);

}  // namespace kad::testing
