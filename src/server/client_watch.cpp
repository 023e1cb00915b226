#include "server/client_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "server/conn_guard.h"
#include "server/socket_addr.h"

namespace ds4::server {
namespace {

bool matches(int fd, const httplib::Request& q) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  std::string lh, ph;
  int lp = -1, pp = -1;
  return numeric_address(local, &lh, &lp) && numeric_address(peer, &ph, &pp) && lp == q.local_port && pp == q.remote_port &&
         lh == q.local_addr && ph == q.remote_addr;
}

}  // namespace

ClientWatch::ClientWatch(const httplib::Request& q) {
  // The connection guard knows this thread's socket; the scan below is the fallback.
  if (const int fd = ConnGuard::current_fd(); fd >= 0) {
    fd_ = fd;
    return;
  }
  if (q.remote_port <= 0 || q.local_port <= 0) return;
  // The 4-tuple names one TCP connection; the handler's thread keeps that fd open (and its
  // number unchanged) until the handler returns, so the fd stays valid while we watch it.
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    if (matches(int(fd), q)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(d);
}

bool ClientWatch::gone() {
  if (fd_ < 0 || gone_) return gone_;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return false;
  next_check_ = now + std::chrono::milliseconds(200);
  pollfd p{fd_, short(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return gone_ = true;
  if (p.revents & POLLIN) {
    // Readable: either pipelined bytes (still there) or end of stream (gone).
    char c;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    gone_ = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return gone_;
}

}  // namespace ds4::server
