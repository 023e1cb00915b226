#include "server/conn_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <string_view>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "server/api_common.h"
#include "server/socket_addr.h"

namespace ds4::server {


namespace {
using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
int64_t after_s(double s) { return now_ns() + int64_t(s * 1e9); }

// The first request's header block as the socket buffer holds it (peeked, nothing consumed).
// kIn also when it can never come (end of stream, an error): httplib then reads the end and
// closes.
HeaderBlock header_block(int fd) {
  char buf[kMaxHeaderBytes];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR ? HeaderBlock::kIn : HeaderBlock::kPartial;
  if (n == 0) return HeaderBlock::kIn;
  return classify_header_block(std::string_view(buf, size_t(n)));
}

// The path of the request whose first bytes are in the socket buffer ("" while its request
// line's target is not in yet): the guard answers before httplib has parsed anything, and the
// path picks the answer's error shape (an Anthropic client must get Anthropic's).
std::string peeked_path(int fd) {
  char buf[kMaxHeaderBytes];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return "";
  return request_line_path(std::string_view(buf, size_t(n)));
}

// The request line is in (or can never come): a refusal waits for it to pick its shape.
bool request_line_in(int fd) {
  char buf[16384];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  return n == 0 || size_t(n) == sizeof buf || std::string_view(buf, size_t(n)).find('\n') != std::string_view::npos;
}

// How long a connection refused at accept waits for its request line (so the 503 is in its
// API's error shape) before it is answered in the default shape.
constexpr double kRefusalWaitS = 1.0;

// kParked: accepted, waiting for its header block without a worker thread.
// kFollowUp: the header phase of a keep-alive follow-up request, seen by its first bytes
// while the previous response may still be being written (so no 408 is written into it).
// kRefusing: refused at accept, parked until its request line is in (or kRefusalWaitS).
enum Phase : int { kParked, kRefusing, kQueued, kHeaders, kFollowUp, kBody, kHandler, kResponding, kClosing };

// A connected socket on local `port`: its peer's numeric address.
bool accepted_on(int fd, int port, std::string* peer) {
  sockaddr_storage local{}, remote{};
  socklen_t ll = sizeof local, rl = sizeof remote;
  std::string lh;
  int lp = -1, rp = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 || !numeric_address(local, &lh, &lp) || lp != port)
    return false;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rl) == 0 && numeric_address(remote, peer, &rp);
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;  // best effort: the connection is being dropped anyway
    off += size_t(n);
  }
}

// A whole response written by the guard itself (no httplib thread is writing to the socket),
// its body in the error shape of the API the request is for.
void send_raw(int fd, int status, const char* reason, const std::string& message, const char* code, ErrorShape shape) {
  const std::string body = error_body(shape, ApiError{status, "invalid_request_error", message, ""}, code);
  char head[256];
  std::snprintf(head, sizeof head,
                "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                status, reason, body.size());
  send_all(fd, head + body);
}

}  // namespace

// After the answer: FIN, then read what the client still sends until it closes (bounded), so
// the final close finds no unread bytes and does not reset the connection (a reset can make
// the client lose the answer it has not read yet).
void linger_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  const int64_t end = after_s(1.0);
  size_t drained = 0;
  char buf[16384];
  while (drained < (size_t(1) << 20)) {
    const int64_t left_ms = (end - now_ns()) / 1000000;
    if (left_ms <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left_ms)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    drained += size_t(n);
  }
}

void answer_header_block(int fd, HeaderBlock block, const std::string& path) {
  const FramingError e = header_block_error(block);
  const bool uri = block == HeaderBlock::kTargetTooLong;
  send_raw(fd, e.status, uri ? "URI Too Long" : "Request Header Fields Too Large", e.message,
           uri ? "uri_too_long" : "request_header_fields_too_large", error_shape(path));
  linger_close(fd);
}

namespace {
struct GuardCounters {
  std::atomic<uint64_t> accepted{0}, refused{0}, header_timeouts{0}, body_timeouts{0}, closed_after_refusal{0},
      parked_now{0}, refusing_now{0};
};
}  // namespace

struct ConnGuard::Conn {
  GuardCounters* counters = nullptr;
  const GuardLimits* limits = nullptr;
  int fd = -1;  // our dup of the connection's socket: open until its task has ended
  ino_t ino = 0;
  std::string peer;
  bool dispatched = false;         // holds (or waits for) a worker thread; under Impl::mu
  std::function<void()> task;      // httplib's task for this connection while parked
  int64_t park_deadline = 0;       // header deadline while parked (from accept)
  std::atomic<int> phase{kQueued};
  std::atomic<int64_t> deadline{0};     // steady-clock ns; 0 = none
  // The error shape of the request in progress: from the first request's peeked request line,
  // then from each request's parsed path (headers_read), for the watchdog's 408.
  std::atomic<ErrorShape> shape{ErrorShape::kOpenAI};
  const char* refusal = nullptr;   // refused at accept: the 503's message; under Impl::mu

  // Phase change from the connection's thread; never undoes the watchdog's kClosing. The
  // deadline is stored first so the watchdog never pairs the new phase with a stale deadline.
  void set(int ph, int64_t dl) {
    deadline = dl;
    int cur = phase.load();
    while (cur != kClosing && !phase.compare_exchange_weak(cur, ph)) {
    }
  }
};

namespace {
thread_local ConnGuard::Conn* t_conn = nullptr;
}

struct ConnGuard::Impl {
  GuardLimits limits;
  std::atomic<int> port{0};
  GuardCounters counters;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::vector<std::shared_ptr<Conn>> conns;  // parked, queued or running
  std::map<std::string, int> per_peer;       // open connections per peer
  std::map<std::string, int> busy_per_peer;  // dispatched ones (holding or awaiting a worker)
  std::set<ino_t> known;  // socket inodes of `conns`
  std::function<void(std::function<void()>)> run_task;  // the live pool's enqueue; under mu
  int wake_fd = -1;  // eventfd: a connection was parked
  std::thread watchdog;

  std::shared_ptr<Conn> adopt();
  void park(const std::shared_ptr<Conn>& c, std::function<void()> fn);
  void dispatch(const std::shared_ptr<Conn>& c);  // under mu
  void release(const std::shared_ptr<Conn>& c);
  void watch();
  void gate(const std::vector<pollfd>& ready, int64_t now);
  void check(Conn& c, int64_t now);
  void drain_parked();
  void refuse_now(Conn& c);
  void answer_on_worker(const std::shared_ptr<Conn>& c, HeaderBlock block);
};

// On the listener thread, right after accept(): the accepted socket is the one socket on our
// port with a peer that no live connection owns (accepts are serial, each one enqueued before
// the next, so there is exactly one).
std::shared_ptr<ConnGuard::Conn> ConnGuard::Impl::adopt() {
  const int p = port.load();
  if (p <= 0) return nullptr;
  std::lock_guard lk(mu);
  DIR* d = opendir("/proc/self/fd");
  if (!d) return nullptr;
  std::shared_ptr<Conn> c;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    struct stat st {};
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode) || known.count(st.st_ino)) continue;
    std::string peer;
    if (!accepted_on(int(fd), p, &peer)) continue;
    const int dup_fd = ::dup(int(fd));
    if (dup_fd < 0) break;
    c = std::make_shared<Conn>();
    c->counters = &counters;
    c->limits = &limits;
    c->fd = dup_fd;
    c->ino = st.st_ino;
    c->peer = peer;
    break;
  }
  closedir(d);
  if (!c) return nullptr;
  counters.accepted++;
  known.insert(c->ino);
  conns.push_back(c);
  // Parked connections cost no thread but two fds each (httplib's and our dup); httplib 0.11
  // selects on fds, which fails past FD_SETSIZE (1024), so their number is bounded.
  const char* over = ++per_peer[c->peer] > limits.max_open_per_client ? "too many open connections from this client"
                     : counters.parked_now.load() >= uint64_t(limits.max_parked) ? "too many connections waiting for their headers"
                                                                                  : nullptr;
  if (over) {
    // Refused: answered once its request line is in (park), or at once when too many refused
    // ones are already waiting for theirs; its task then finds the socket shut and ends.
    counters.refused++;
    c->refusal = over;
    if (counters.refusing_now.load() >= uint64_t(limits.max_parked)) refuse_now(*c);
  }
  return c;
}

// The 503 of a connection refused at accept, in the shape of what it has sent so far. Under mu.
void ConnGuard::Impl::refuse_now(Conn& c) {
  send_raw(c.fd, 503, "Service Unavailable", c.refusal, "too_many_connections", error_shape(peeked_path(c.fd)));
  ::shutdown(c.fd, SHUT_RDWR);
  c.phase = kClosing;
}

void ConnGuard::Impl::release(const std::shared_ptr<Conn>& c) {
  std::lock_guard lk(mu);
  if (auto it = per_peer.find(c->peer); it != per_peer.end() && --it->second <= 0) per_peer.erase(it);
  if (c->dispatched)
    if (auto it = busy_per_peer.find(c->peer); it != busy_per_peer.end() && --it->second <= 0) busy_per_peer.erase(it);
  known.erase(c->ino);
  std::erase(conns, c);
  ::close(c->fd);  // httplib has closed its fd; this was the socket's last reference
}

void ConnGuard::Impl::check(Conn& c, int64_t now) {
  // (A response in progress has no deadline here, also when the client has already sent its next
  // request: HttpServer's keep-alive loop starts that request's header deadline when it begins
  // reading it, next_request_begins. Starting it from the bytes received cut a long SSE stream
  // with a request pipelined behind it after header_timeout_s.)
  const int ph = c.phase.load();
  if (ph != kHeaders && ph != kFollowUp && ph != kBody) return;
  const int64_t dl = c.deadline.load();
  if (dl == 0 || now < dl) return;
  int exp = ph;
  if (!c.phase.compare_exchange_strong(exp, kClosing)) return;  // moved on meanwhile
  char msg[160];
  if (ph == kBody) {
    std::snprintf(msg, sizeof msg, "request body not received within %g s", limits.body_timeout_s);
    counters.body_timeouts++;
  } else {
    std::snprintf(msg, sizeof msg, "request headers not received within %g s", limits.header_timeout_s);
    counters.header_timeouts++;
  }
  if (ph != kFollowUp) send_raw(c.fd, 408, "Request Timeout", msg, "request_timeout", c.shape.load());
  // Wakes the worker blocked in select/recv: it sees the end of the stream and closes.
  ::shutdown(c.fd, SHUT_RDWR);
}

void ConnGuard::Impl::park(const std::shared_ptr<Conn>& c, std::function<void()> fn) {
  std::lock_guard lk(mu);
  c->task = std::move(fn);
  if (c->phase.load() == kClosing) return dispatch(c);  // refused and answered at accept: let it close
  if (c->refusal) {
    c->phase = kRefusing;
    c->park_deadline = after_s(std::min(kRefusalWaitS, limits.header_timeout_s));
    counters.refusing_now++;
  } else {
    c->phase = kParked;
    c->park_deadline = after_s(limits.header_timeout_s);
    counters.parked_now++;
  }
  const uint64_t one = 1;
  if (::write(wake_fd, &one, sizeof one) < 0) {
  }  // the gate polls every 100 ms anyway
}

// Hands a connection to a worker, unless its peer already holds its share of them (then a
// 503 and the task only closes the socket). Under mu.
void ConnGuard::Impl::dispatch(const std::shared_ptr<Conn>& c) {
  if (c->phase.load() == kParked) {
    counters.parked_now--;
    c->phase = kQueued;
    const bool loopback = c->peer.rfind("127.", 0) == 0 || c->peer == "::1" || c->peer.rfind("::ffff:127.", 0) == 0;
    const ErrorShape shape = error_shape(peeked_path(c->fd));  // the header block is in
    c->shape = shape;
    if (limits.max_per_client > 0 && (limits.limit_loopback || !loopback) && busy_per_peer[c->peer] >= limits.max_per_client) {
      c->phase = kClosing;
      counters.refused++;
      send_raw(c->fd, 503, "Service Unavailable",
               "too many concurrent requests from this client (limit " + std::to_string(limits.max_per_client) + ")",
               "too_many_connections", shape);
      ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  if (c->phase.load() != kClosing) {
    c->dispatched = true;
    busy_per_peer[c->peer]++;
  }
  auto fn = std::move(c->task);
  c->task = nullptr;
  if (run_task) run_task(std::move(fn));
}

// A parked connection whose header block is refused unread (too large): answered on a worker,
// which reads what the client still sends until it closes (bounded, linger_close), since
// closing over unread bytes resets the connection and can lose the answer. Under mu.
void ConnGuard::Impl::answer_on_worker(const std::shared_ptr<Conn>& c, HeaderBlock block) {
  counters.parked_now--;
  c->phase = kClosing;
  auto fn = std::move(c->task);
  c->task = nullptr;
  auto answer = [fd = c->fd, block, path = peeked_path(c->fd), fn = std::move(fn)] {
    answer_header_block(fd, block, path);
    ::shutdown(fd, SHUT_RDWR);  // httplib's loop then reads the end of the stream, not the headers
    fn();
  };
  if (run_task) run_task(std::move(answer));
}

// Parked connections: dispatched when their header block is in, 408 at their deadline.
void ConnGuard::Impl::gate(const std::vector<pollfd>& polled, int64_t now) {
  for (const auto& p : polled) {
    auto it = std::find_if(conns.begin(), conns.end(), [&](const auto& c) { return c->fd == p.fd && c->task; });
    if (it == conns.end()) continue;
    const auto c = *it;
    const bool readable = (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0;
    if (c->phase.load() == kRefusing) {
      if ((readable && request_line_in(c->fd)) || now >= c->park_deadline) {
        counters.refusing_now--;
        refuse_now(*c);
        dispatch(c);  // its task sees the end of the stream and closes httplib's socket
      }
      continue;
    }
    const HeaderBlock block = readable ? header_block(c->fd) : HeaderBlock::kPartial;
    if (block == HeaderBlock::kIn) {
      dispatch(c);
    } else if (block == HeaderBlock::kTooLarge || block == HeaderBlock::kTargetTooLong) {
      answer_on_worker(c, block);
    } else if (now >= c->park_deadline) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "request headers not received within %g s", limits.header_timeout_s);
      counters.header_timeouts++;
      send_raw(c->fd, 408, "Request Timeout", msg, "request_timeout", error_shape(peeked_path(c->fd)));
      ::shutdown(c->fd, SHUT_RDWR);
      c->phase = kClosing;
      counters.parked_now--;
      dispatch(c);  // its task sees the end of the stream and closes httplib's socket
    }
  }
}

void ConnGuard::Impl::watch() {
  std::vector<pollfd> fds;
  std::unique_lock lk(mu);
  while (!stopping) {
    fds.assign(1, pollfd{wake_fd, POLLIN, 0});
    for (const auto& c : conns)
      if (c->task) fds.push_back({c->fd, POLLIN, 0});
    lk.unlock();
    ::poll(fds.data(), fds.size(), 100);
    if (fds[0].revents & POLLIN) {
      uint64_t n;
      if (::read(wake_fd, &n, sizeof n) < 0) {
      }
    }
    lk.lock();
    const int64_t now = now_ns();
    gate({fds.begin() + 1, fds.end()}, now);
    for (const auto& c : conns) check(*c, now);
  }
}

// The listener is done: every parked task runs now, so httplib closes its sockets.
void ConnGuard::Impl::drain_parked() {
  std::lock_guard lk(mu);
  for (const auto& c : conns)
    if (c->task) {
      if (c->phase.load() == kRefusing) counters.refusing_now--;
      ::shutdown(c->fd, SHUT_RDWR);
      c->phase = kClosing;
      dispatch(c);
    }
  run_task = nullptr;
}

namespace {
// The thread pool behind the guard: each connection's task knows its Conn (thread-local).
class GuardQueue : public httplib::TaskQueue {
 public:
  GuardQueue(ConnGuard::Impl& g, size_t threads) : g_(g), pool_(threads) {
    std::lock_guard lk(g_.mu);
    g_.run_task = [this](std::function<void()> fn) { pool_.enqueue(std::move(fn)); };
  }
  void enqueue(std::function<void()> fn) override {
    auto c = g_.adopt();
    if (!c) return pool_.enqueue(std::move(fn));  // not found: unguarded, as httplib alone
    // Parked until its header block is in: a slow client holds no worker meanwhile.
    g_.park(c, [this, c, fn = std::move(fn)] {
      if (c) c->set(kHeaders, after_s(c->limits->header_timeout_s));
      t_conn = c.get();
      fn();  // httplib's keep-alive loop over this connection; closes its socket
      t_conn = nullptr;
      g_.release(c);
    });
  }
  void shutdown() override {
    g_.drain_parked();
    pool_.shutdown();
  }

 private:
  ConnGuard::Impl& g_;
  httplib::ThreadPool pool_;
};
}  // namespace

ConnGuard::ConnGuard(GuardLimits limits) : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  impl_->watchdog = std::thread([this] { impl_->watch(); });
}

ConnGuard::~ConnGuard() {
  {
    std::lock_guard lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->watchdog.join();
  ::close(impl_->wake_fd);
}

void ConnGuard::set_port(int port) { impl_->port = port; }

httplib::TaskQueue* ConnGuard::new_task_queue(size_t threads) {
  return new GuardQueue(*impl_, threads);
}

GuardStats ConnGuard::stats() const {
  const auto& k = impl_->counters;
  return {k.accepted.load(), k.refused.load(), k.header_timeouts.load(), k.body_timeouts.load(),
          k.closed_after_refusal.load(), k.parked_now.load()};
}

void ConnGuard::headers_read(const std::string& path) {
  if (!t_conn) return;
  t_conn->shape = error_shape(path);
  t_conn->set(kBody, after_s(t_conn->limits->body_timeout_s));
}
void ConnGuard::handler_started() {
  if (t_conn) t_conn->set(kHandler, 0);
}
void ConnGuard::response_started(bool streaming) {
  (void)streaming;  // both wait for the next request's first byte the same way
  if (!t_conn) return;
  t_conn->set(kResponding, 0);
}
void ConnGuard::next_request_begins() {
  if (!t_conn) return;
  // The phase first: the watchdog skips a kFollowUp whose deadline is still 0.
  int exp = kResponding;
  if (t_conn->phase.compare_exchange_strong(exp, kFollowUp)) t_conn->deadline = after_s(t_conn->limits->header_timeout_s);
}
int ConnGuard::current_fd() { return t_conn ? t_conn->fd : -1; }

void mark_connection_close(const httplib::Request& q) {
  // q is process_request's own (non-const) Request: "Connection: close" makes httplib say so.
  auto& mq = const_cast<httplib::Request&>(q);
  mq.headers.erase("Connection");
  mq.set_header("Connection", "close");
}

void close_after(const httplib::Request& q, httplib::Response& r, int status, const std::string& body) {
  mark_connection_close(q);
  r.status = status;
  ConnGuard::Conn* c = t_conn;
  if (c && c->phase.load() != kClosing) {  // (kClosing: the guard already answered and shut it)
    c->set(kClosing, 0);
    c->counters->closed_after_refusal++;
  }
  const int fd = c ? c->fd : -1;
  r.set_content_provider(body.size(), "application/json",
                         [body, fd](size_t off, size_t len, httplib::DataSink& sink) {
                           sink.write(body.data() + off, len);
                           if (fd >= 0) linger_close(fd);
                           return false;  // ends httplib's keep-alive loop: it shuts and closes
                         });
}

}  // namespace ds4::server
