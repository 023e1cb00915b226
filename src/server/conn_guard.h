#pragma once
// Connection guard for cpp-httplib 0.11 (Debian 12), which gives every accepted connection a
// worker thread at once, has no header-read deadline (a read timeout per recv only: one
// header line every 2 s holds a thread forever), no per-client limit, and no way to end a
// connection from a handler. Its request loop is private, so the guard wraps what is public:
//  - the task queue (Server::new_task_queue): enqueue() runs on the listener thread right
//    after accept(); the guard finds that socket (the one socket on our port it has not seen),
//    dup()s it (a late shutdown can never hit a reused fd number) and parks it: the task goes
//    to a worker only once the request's header block is in the socket buffer (MSG_PEEK), so
//    slow clients hold an fd, not a thread; a parked connection past its header deadline gets
//    a 408 and is closed. A peer holding its share of workers gets a 503. A connection over
//    the open or parked limits is refused at accept, but its 503 waits (a second at most,
//    holding no worker) for the request line, like every answer of the guard in the error
//    shape of the request's API (Anthropic's on /v1/messages*; without a request line, OpenAI's);
//  - a watchdog (the same thread) that shuts down a connection whose keep-alive follow-up
//    headers or whose body do not arrive within their deadlines;
//  - hooks the routes call on the connection's own thread (phase changes), and close_after():
//    a refusal sent before the body was read ends the connection after the response, so the
//    unread body is never parsed as the next request.
#include <httplib.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/http_framing.h"

namespace ds4::server {

struct GuardLimits {
  double header_timeout_s = 10;  // a worker picks the connection up -> full header block
  double body_timeout_s = 60;    // headers -> body read (the route handler starts)
  int max_per_client = 32;       // connections holding (or queued for) a worker, per peer address
  // Loopback peers are all one address (the web page, SDK clients, agents on this machine):
  // a per-address limit cannot tell them apart, so it applies to them only when asked for.
  bool limit_loopback = false;
  int max_open_per_client = 128;  // open connections (parked ones too) per peer address, loopback too
  int max_parked = 256;           // connections waiting for their headers, all peers together
};

// httplib's read timeout (each recv of a request): a backstop past both deadlines. httplib
// answers its own read timeout with a bare 400 (before: 30 s, under the 60 s body deadline, so
// a stalled body got that 400); the guard must answer every stall first, with its 408.
constexpr double kReadTimeoutMarginS = 5;
inline double backstop_read_timeout_s(const GuardLimits& g) {
  return (g.header_timeout_s > g.body_timeout_s ? g.header_timeout_s : g.body_timeout_s) + kReadTimeoutMarginS;
}

struct GuardStats {
  uint64_t accepted = 0, refused = 0 /* 503s: a per-client or the parked limit */, header_timeouts = 0, body_timeouts = 0, closed_after_refusal = 0;
  uint64_t parked = 0;  // now: accepted, headers not yet in
};

class ConnGuard {
 public:
  explicit ConnGuard(GuardLimits limits);
  ~ConnGuard();
  ConnGuard(const ConnGuard&) = delete;
  ConnGuard& operator=(const ConnGuard&) = delete;

  // The port the server listens on (finds accepted sockets); call before listening.
  void set_port(int port);
  // For Server::new_task_queue: a thread pool of `threads` behind the guard.
  httplib::TaskQueue* new_task_queue(size_t threads);
  GuardStats stats() const;

  // Hooks, on the connection's own thread (no-ops on a thread the guard does not run).
  // Pre-routing: the body deadline starts; `path` picks the shape of a 408 for the body.
  static void headers_read(const std::string& path);
  static void handler_started();                         // a route handler runs: no deadline
  static void response_started(bool streaming);          // post-routing
  // The keep-alive loop (http_server.h) has a later request's first byte (received after the
  // response, or read along with the previous request: pipelined): its header deadline starts.
  // Nothing else starts it, so a request pipelined behind a long streamed response waits for that
  // response without a clock running.
  static void next_request_begins();
  // The connection's socket (our dup), -1 when unknown.
  static int current_fd();

  struct Conn;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Makes httplib answer "Connection: close" (it says so when the request does).
void mark_connection_close(const httplib::Request& q);

// Sends `status` with `body` (JSON) and then ends the connection: Connection: close, the
// body written, our side shut for writing, what the client still sends drained (bounded:
// 1 s, 1 MiB) so the close does not reset the answer away, then the keep-alive loop ends.
// For refusals decided before httplib read the body (auth, framing).
void close_after(const httplib::Request& q, httplib::Response& r, int status, const std::string& body);

// FIN, then what the client still sends read and dropped until it closes (at most 1 MiB within
// 1 s), so the close that follows finds no unread bytes: a close with unread input resets the
// connection, and the client can lose the answers it has not read yet.
void linger_close(int fd);

// A header block refused unread (kTooLarge: 431, kTargetTooLong: 414), answered in the error
// shape of `path` (request_line_path), then what the client still sends drained (linger_close)
// so the close does not reset the answer away; the caller ends the connection. The guard's
// answer to a first request, and the keep-alive loop's to a later one (http_server.h).
void answer_header_block(int fd, HeaderBlock block, const std::string& path);

}  // namespace ds4::server
