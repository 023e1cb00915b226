#pragma once
// Notices that the client of a non-streaming request went away, so its generation can be
// cancelled instead of running to max_tokens for nobody. Streaming requests notice through
// failed writes (keepalives every second); a non-streaming handler writes nothing until the
// end, and httplib 0.11 gives it neither its socket nor a liveness check.
#include <httplib.h>

#include <chrono>

namespace ds4::server {

class ClientWatch {
 public:
  // Finds the request's connection among this process's sockets by its local and peer
  // addresses. When it cannot be found, gone() stays false (no detection, no harm).
  explicit ClientWatch(const httplib::Request& q);
  // True once the peer has closed (or reset) the connection. Looks at most every 200 ms.
  bool gone();
  bool watching() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  bool gone_ = false;
  std::chrono::steady_clock::time_point next_check_{};
};

}  // namespace ds4::server
