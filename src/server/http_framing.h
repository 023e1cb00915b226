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
#include <string_view>

namespace ds4::server {

struct FramingError {
  int status;  // 400, 411, 413, 417 or 501 (framing); the others below
  std::string message;
};

// A request's header block as far as it has come in (`received`: the bytes from its request
// line on; only the first kMaxHeaderBytes are looked at). Larger than httplib (or this server)
// takes: a header section over kMaxHeaderBytes, or one header line over httplib's line limit
// (which it would answer with a bare 400), kTooLarge (431); a request line without its end in
// kMaxHeaderBytes, kTargetTooLong (414). Checked by the connection guard for a connection's
// first request (peeked) and by the keep-alive loop (http_server.h) for each request.
enum class HeaderBlock { kPartial, kIn, kTooLarge, kTargetTooLong };
constexpr size_t kMaxHeaderBytes = 16384;
HeaderBlock classify_header_block(std::string_view received);
// The answer to a header block refused unread (kTooLarge: 431, kTargetTooLong: 414).
FramingError header_block_error(HeaderBlock block);
// The path in the request line at the start of `received` ("" while its target is not in):
// an answer given before httplib parsed anything picks its error shape by it.
std::string request_line_path(std::string_view received);

// Content-Length: one value (repeats must agree), digits only, at most max_body_bytes, and 0
// on a method httplib reads no body for (GET, HEAD, OPTIONS).
// Transfer-Encoding: refused (chunked with 411: every client this server is for sends a
// Content-Length, and httplib would not bound a chunked body; any other coding with 501, as
// RFC 9112 §6.1 says for a coding the server does not understand). A POST/PUT/PATCH without
// either: 411 (httplib would read it until the client closes). Expect other than 100-continue
// (httplib answers that one): 417 (RFC 9110 §10.1.1).
std::optional<FramingError> check_framing(const httplib::Request& q, int64_t max_body_bytes);

// Header fields as RFC 9110 §5 allows them: a name of token characters, a value without control
// characters other than HTAB (a NUL, CR or LF in one is a 400: values are passed on to logs,
// the engine and other headers, and a client sending them is broken or probing). httplib keeps
// them as received (after percent-decoding values, so "%00" is a NUL too).
std::optional<FramingError> check_header_fields(const httplib::Request& q);

// CORS preflight: the Access-Control-Allow-Headers value. The headers the browser asks for
// (Access-Control-Request-Headers) are echoed when they are a plain list of header names (token
// characters, commas, spaces; at most 4 KiB): the official SDKs send ones no fixed list keeps up
// with (x-stainless-*, anthropic-beta, ...). Otherwise kCorsAllowHeaders, every header those SDKs
// and the web page send.
extern const char* const kCorsAllowHeaders;
std::string cors_allow_headers(const httplib::Request& q);

// The methods this server implements on some resource: GET, HEAD, POST, OPTIONS. Any other is
// a 501 on every path (RFC 9110 §15.6.2); an implemented one that a known path does not take
// is a 405 (routes.h).
bool implemented_method(const std::string& method);
std::optional<FramingError> check_method(const httplib::Request& q);

// The request declares a body (a Content-Length other than 0, or a Transfer-Encoding): a
// refusal sent before httplib read it must end the connection (conn_guard.h close_after).
bool declares_body(const httplib::Request& q);

// The request's path, also when httplib stopped parsing before setting q.path (a refused
// request line): the target up to its query.
std::string request_path(const httplib::Request& q);

// httplib's own error answers (404, or what it could not parse: 400, 414, 416), as this server
// words them; a refused request line becomes 501 for a method no server route implements and
// 505 for an HTTP version other than 1.0 / 1.1 (httplib says 400 to both).
FramingError httplib_error(const httplib::Request& q, int status);

}  // namespace ds4::server
