#include "server/http_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

#include "server/conn_guard.h"
#include "server/http_framing.h"
#include "server/socket_addr.h"

namespace ds4::server {
namespace {

// Bytes asked of the socket at a time; a read at least this large (a body) goes straight to
// the caller's buffer.
constexpr size_t kReadChunk = 16384;

int timeout_ms(time_t sec, time_t usec) { return int(sec * 1000 + usec / 1000); }

// The events on `fd` within `ms` (0: none). EINTR restarts the wait with the full time: the
// server's signals are rare (stop), and a read timeout is a backstop (conn_guard.h).
short wait_for(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int n;
  do n = ::poll(&p, 1, ms);
  while (n < 0 && errno == EINTR);
  return n > 0 ? p.revents : 0;
}

// One connection's stream for all of its requests: what a read took past the end of one
// request stays buffered for the next. Otherwise as httplib's SocketStream: each read and
// write waits at most its timeout, and a peer that has closed its side is not writable.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, int read_ms, int write_ms) : fd_(fd), read_ms_(read_ms), write_ms_(write_ms) {}

  bool is_readable() const override { return buffered() > 0 || wait_for(fd_, POLLIN, read_ms_) != 0; }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_ms_) != 0 && peer_open(); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0) {
      if (wait_for(fd_, POLLIN, read_ms_) == 0) return -1;
      if (size >= kReadChunk) return recv_into(ptr, size);
      if (const ssize_t n = fill(); n <= 0) return n;
    }
    const size_t n = std::min(size, buffered());
    std::memcpy(ptr, buf_.data() + off_, n);
    off_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return ::send(fd_, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return fd_; }

  // The next request's first byte is in (buffered, or on the socket; also the end of the
  // stream) within `ms`, while `listening` stays open (a stopping server ends idle waits).
  bool await_request(int ms, const std::atomic<socket_t>& listening) const {
    if (buffered() > 0) return true;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (listening != INVALID_SOCKET) {
      if (wait_for(fd_, POLLIN, 50) != 0) return true;
      if (std::chrono::steady_clock::now() >= end) return false;
    }
    return false;
  }

  // Reads until the buffer holds the request's whole header block, or more than the limit;
  // when the stream ends first (or stalls past the read timeout), kIn: httplib then reads
  // that end and closes, as it would have.
  HeaderBlock read_header_block() {
    for (;;) {
      const HeaderBlock b = classify_header_block(pending());
      if (b != HeaderBlock::kPartial) return b;
      if (wait_for(fd_, POLLIN, read_ms_) == 0 || fill() <= 0) return HeaderBlock::kIn;
    }
  }

  std::string_view pending() const { return std::string_view(buf_).substr(off_); }
  bool unread() const { return buffered() > 0 || wait_for(fd_, POLLIN, 0) != 0; }

 private:
  size_t buffered() const { return buf_.size() - off_; }

  ssize_t recv_into(char* ptr, size_t size) {
    ssize_t n;
    do n = ::recv(fd_, ptr, size, 0);
    while (n < 0 && errno == EINTR);
    return n;
  }

  // One recv appended to what is buffered (the consumed part dropped first).
  ssize_t fill() {
    buf_.erase(0, off_);
    off_ = 0;
    const size_t had = buf_.size();
    buf_.resize(had + kReadChunk);
    const ssize_t n = recv_into(buf_.data() + had, kReadChunk);
    buf_.resize(had + size_t(std::max<ssize_t>(n, 0)));
    return n;
  }

  // httplib's is_socket_alive: nothing to read, or something other than the end of stream.
  bool peer_open() const {
    if (wait_for(fd_, POLLIN, 0) == 0) return true;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  template <typename Get>
  void address(Get get, std::string& ip, int& port) const {
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    if (get(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0 || !numeric_address(sa, &ip, &port)) {
      ip.clear();
      port = -1;
    }
  }

  int fd_;
  int read_ms_, write_ms_;
  std::string buf_;
  size_t off_ = 0;
};

}  // namespace

void HttpServer::widen_backlog() {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
}

// httplib's keep-alive loop (process_server_socket_core: at most keep_alive_max_count_
// requests, each within keep_alive_timeout_sec_ of the last; the last one answered with
// Connection: close) over one ConnStream.
bool HttpServer::process_and_close_socket(socket_t sock) {
  ConnStream strm(sock, timeout_ms(read_timeout_sec_, read_timeout_usec_), timeout_ms(write_timeout_sec_, write_timeout_usec_));
  bool ret = false, drained = false;
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!strm.await_request(int(keep_alive_timeout_sec_ * 1000), svr_sock_)) break;
    ConnGuard::next_request_begins();  // its header deadline, also when it came pipelined
    if (const HeaderBlock b = strm.read_header_block(); b == HeaderBlock::kTooLarge || b == HeaderBlock::kTargetTooLong) {
      answer_header_block(sock, b, request_line_path(strm.pending()));  // (drains what follows)
      ret = false, drained = true;
      break;
    }
    bool connection_closed = false;
    ret = process_request(strm, left == 1, connection_closed, nullptr);
    if (!ret || connection_closed) break;
  }
  // Requests still unread (pipelined past the last answered one, or past a Connection: close):
  // drained first, so the close does not reset the connection under the answers in flight.
  if (!drained && strm.unread()) linger_close(sock);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace ds4::server
