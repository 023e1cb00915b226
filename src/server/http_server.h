#pragma once
// httplib::Server with its own keep-alive loop, through the one virtual httplib 0.11 gives for
// it (process_and_close_socket; process_request, which parses and answers one request, is
// protected). httplib's loop makes a new SocketStream for each request, and with it a new
// read buffer: the bytes a read took past the end of one request (a pipelined next request,
// sent before the answer came) were dropped with it, and the client waited out the keep-alive
// timeout for answers that never came. Here one stream serves all of a connection's requests.
// The loop also checks each request's header block before httplib parses it, as the
// connection guard does for the first one (conn_guard.h): a later request's header section
// over 16 KiB, or a header line over httplib's 8 KiB, is a 431 too, and the connection ends
// (httplib would take any number of header lines, and answer a long one with a bare 400).
#include <httplib.h>

namespace ds4::server {

class HttpServer : public httplib::Server {
 public:
  // httplib 0.11 listens with a backlog of 5: a burst of connects (or a flood the guard is
  // about to refuse) then waits on SYN retries. Its listening socket is protected: re-listen it.
  void widen_backlog();

 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace ds4::server
