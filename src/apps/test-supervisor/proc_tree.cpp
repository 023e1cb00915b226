#include "apps/test-supervisor/proc_tree.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace ds4::supervisor {
namespace {

// ppid is field 4 of /proc/PID/stat; the command name (field 2) may hold spaces and
// parentheses, so parse after the last ')'.
bool read_ppid(pid_t pid, pid_t* ppid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  char state;
  int pp;
  if (std::sscanf(p + 1, " %c %d", &state, &pp) != 2) return false;
  *ppid = pid_t(pp);
  return true;
}

}  // namespace

std::vector<pid_t> process_tree(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end;
      long pid = std::strtol(e->d_name, &end, 10);
      pid_t pp;
      if (*end == 0 && pid > 0 && read_ppid(pid_t(pid), &pp)) children.emplace(pp, pid_t(pid));
    }
    closedir(d);
  }
  std::vector<pid_t> out = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    auto [a, b] = children.equal_range(out[i]);
    for (auto it = a; it != b; ++it) out.push_back(it->second);
  }
  return out;
}

uint64_t tree_memory_bytes(const std::vector<pid_t>& pids) {
  uint64_t total_kb = 0;
  for (pid_t pid : pids) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/status", int(pid));
    FILE* f = std::fopen(path, "r");
    if (!f) continue;
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kb;
      if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1 || std::sscanf(line, "VmSwap: %llu kB", &kb) == 1) total_kb += kb;
    }
    std::fclose(f);
  }
  return total_kb * 1024;
}

}  // namespace ds4::supervisor
