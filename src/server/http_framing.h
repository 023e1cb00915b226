#pragma once
// Request framing checked right after the headers, before httplib 0.11 reads a body: it would
// wait out its 30 s read timeout for a declared body that never comes (an oversized or
// negative Content-Length is skipped byte by byte before the 413), read an unknown
// Transfer-Encoding until the client closes, and append a chunked body without any size
// limit. A refusal here is answered at once and the connection closed (conn_guard.h
// close_after), since the body bytes may already be on their way.
#include <httplib.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ds4::server {

struct FramingError {
  int status;  // 400, 411 or 413
  std::string message;
};

// Content-Length: one value (repeats must agree), digits only, at most max_body_bytes, and 0
// on a method httplib reads no body for (GET, HEAD, OPTIONS).
// Transfer-Encoding: refused (chunked with 411: every client this server is for sends a
// Content-Length, and httplib would not bound a chunked body). A POST/PUT/PATCH without
// either: 411 (httplib would read it until the client closes).
std::optional<FramingError> check_framing(const httplib::Request& q, int64_t max_body_bytes);

}  // namespace ds4::server
