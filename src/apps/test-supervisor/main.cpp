// test-supervisor MEM_MIB START_S IDLE_S -- CMD...
// Runs CMD with its stdout+stderr relayed, polling every 100 ms the memory of its whole
// process tree (RSS + swap). Kills the tree when memory exceeds MEM_MIB, when no start
// marker appeared within START_S seconds, or when no output line appeared for IDLE_S
// seconds after the start. There is no total time limit: a slow but progressing job runs
// to the end. The start marker is the first output line, or the first line containing
// $TEST_SUPERVISOR_START_MARKER when that is set. Prints the peak memory and why it ended.
// Exit code: CMD's (128+signal if killed by a signal it got elsewhere), or 3 memory,
// 4 no start, 5 no progress.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/test-supervisor/proc_tree.h"

using namespace ds4::supervisor;
using Clock = std::chrono::steady_clock;

namespace {

int usage() {
  std::fprintf(stderr, "usage: test-supervisor MEM_MIB START_S IDLE_S -- CMD [ARGS...]\n");
  return 2;
}

bool parse_num(const char* s, double* out) {
  char* end;
  *out = std::strtod(s, &end);
  return *end == 0 && *out > 0;
}

pid_t spawn(char** argv, int out_fd) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // its own group, so the whole tree can be signalled at once
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    execvp(argv[0], argv);
    std::fprintf(stderr, "test-supervisor: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

void kill_tree(pid_t root) {
  std::vector<pid_t> pids = process_tree(root);  // descendants that left the group too
  kill(-root, SIGKILL);
  for (pid_t p : pids) kill(p, SIGKILL);
}

struct Watch {
  double mem_limit, start_s, idle_s;
  std::string marker;
  bool started = false;
  std::string partial;  // output since the last newline
  Clock::time_point begin = Clock::now(), last_line = Clock::now();
  uint64_t peak = 0;

  void on_output(const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (p[i] != '\n') {
        partial += p[i];
        continue;
      }
      if (!started && (marker.empty() || partial.find(marker) != std::string::npos)) started = true;
      last_line = Clock::now();
      partial.clear();
    }
  }
  // Empty while healthy, else why the tree must be killed.
  std::string verdict(uint64_t mem) const {
    auto now = Clock::now();
    if (double(mem) > mem_limit * 1048576.0)
      return "memory " + std::to_string(mem >> 20) + " MiB over the limit of " + std::to_string(int64_t(mem_limit)) + " MiB";
    if (!started && std::chrono::duration<double>(now - begin).count() > start_s)
      return "no start within " + std::to_string(start_s) + " s";
    if (started && std::chrono::duration<double>(now - last_line).count() > idle_s)
      return "no progress within " + std::to_string(idle_s) + " s";
    return "";
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[4], "--") != 0) return usage();
  Watch w;
  if (!parse_num(argv[1], &w.mem_limit) || !parse_num(argv[2], &w.start_s) || !parse_num(argv[3], &w.idle_s)) return usage();
  if (const char* m = std::getenv("TEST_SUPERVISOR_START_MARKER")) w.marker = m;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t child = spawn(argv + 5, fds[1]);
  close(fds[1]);
  std::string reason;
  int code = 0;
  bool out_open = true;
  for (;;) {
    pollfd pfd = {fds[0], POLLIN, 0};
    if (out_open && poll(&pfd, 1, 100) > 0) {
      char buf[4096];
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n > 0) {
        fwrite(buf, 1, size_t(n), stdout);
        fflush(stdout);
        w.on_output(buf, size_t(n));
      } else {
        out_open = false;  // EOF: the tree closed its output; keep waiting for the exit
      }
    } else if (!out_open) {
      usleep(100000);
    }
    uint64_t mem = tree_memory_bytes(process_tree(child));
    if (mem > w.peak) w.peak = mem;
    int status;
    if (waitpid(child, &status, WNOHANG) == child) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      reason = WIFEXITED(status) ? "exited with code " + std::to_string(code) : "killed by signal " + std::to_string(WTERMSIG(status));
      kill(-child, SIGKILL);  // leftovers in its group
      break;
    }
    std::string v = w.verdict(mem);
    if (!v.empty()) {
      kill_tree(child);
      waitpid(child, nullptr, 0);
      reason = "killed: " + v;
      code = v.rfind("memory", 0) == 0 ? 3 : v.rfind("no start", 0) == 0 ? 4 : 5;
      break;
    }
  }
  std::fprintf(stderr, "test-supervisor: peak memory %.1f MiB; %s\n", double(w.peak) / 1048576.0, reason.c_str());
  return code;
}
