#pragma once
// The process tree under a root pid, read from /proc (Linux).
#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace ds4::supervisor {

// root and all its descendants that are alive now.
std::vector<pid_t> process_tree(pid_t root);
// Sum of VmRSS + VmSwap over the pids, in bytes (pids that vanished count 0).
uint64_t tree_memory_bytes(const std::vector<pid_t>& pids);

}  // namespace ds4::supervisor
