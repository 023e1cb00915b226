#include "server/http_framing.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace ds4::server {
namespace {
std::string trimmed_lower(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(s.back())) s.pop_back();
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Printable in a JSON message: a header value is the client's bytes.
std::string shown(const std::string& v) {
  std::string out;
  for (unsigned char c : v.substr(0, 40)) out += c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? char(c) : '?';
  return out;
}
}  // namespace

HeaderBlock classify_header_block(std::string_view received) {
  const std::string_view v = received.substr(0, kMaxHeaderBytes);
  // Only CRLF CRLF ends the block: httplib skips a line that does not end in CRLF and reads on,
  // so a block "ended" by a bare LF LF would let it take header lines without limit.
  const size_t end = v.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (v.size() < kMaxHeaderBytes) return HeaderBlock::kPartial;
    return v.find('\n') == std::string_view::npos ? HeaderBlock::kTargetTooLong : HeaderBlock::kTooLarge;
  }
  // Each header line after the request line (whose own limit httplib answers with a 414).
  for (size_t line = v.find('\n') + 1; line <= end;) {
    const size_t nl = v.find('\n', line);
    if (nl - line + 1 > size_t(CPPHTTPLIB_HEADER_MAX_LENGTH)) return HeaderBlock::kTooLarge;
    line = nl + 1;
  }
  return HeaderBlock::kIn;
}

FramingError header_block_error(HeaderBlock block) {
  if (block == HeaderBlock::kTargetTooLong)
    return {414, "request line over " + std::to_string(kMaxHeaderBytes) + " bytes"};
  return {431, "request header section over " + std::to_string(kMaxHeaderBytes) + " bytes, or a header line over " +
                   std::to_string(CPPHTTPLIB_HEADER_MAX_LENGTH)};
}

std::string request_line_path(std::string_view v) {
  const size_t a = v.find(' ');
  const size_t b = a == std::string_view::npos ? a : v.find(' ', a + 1);
  if (b == std::string_view::npos || v.substr(0, a).find('\n') != std::string_view::npos) return "";
  const std::string_view target = v.substr(a + 1, b - a - 1);
  return std::string(target.substr(0, target.find('?')));
}

std::optional<FramingError> check_framing(const httplib::Request& q, int64_t max_body_bytes) {
  const size_t te_count = q.get_header_value_count("Transfer-Encoding");
  const size_t cl_count = q.get_header_value_count("Content-Length");
  if (te_count > 1) return FramingError{400, "Transfer-Encoding given more than once"};
  if (te_count == 1) {
    const std::string te = trimmed_lower(q.get_header_value("Transfer-Encoding"));
    if (cl_count > 0) return FramingError{400, "both Content-Length and Transfer-Encoding given"};
    if (te == "chunked") return FramingError{411, "chunked request bodies are not accepted: send a Content-Length"};
    return FramingError{501, "unsupported Transfer-Encoding '" + shown(te) + "'"};
  }
  for (size_t i = 0; i < q.get_header_value_count("Expect"); ++i)
    if (const std::string e = trimmed_lower(q.get_header_value("Expect", i)); e != "100-continue")
      return FramingError{417, "unsupported expectation '" + shown(e) + "' (only 100-continue)"};
  if (cl_count == 0) {
    if (q.method == "POST" || q.method == "PUT" || q.method == "PATCH")
      return FramingError{411, "a " + q.method + " request needs a Content-Length"};
    return std::nullopt;
  }
  std::string first;
  for (size_t i = 0; i < cl_count; ++i) {
    const std::string v = trimmed_lower(q.get_header_value("Content-Length", i));
    // 18 digits at most: stoll cannot overflow (19 digits can: 9223372036854775808 and up),
    // and no body is anywhere near 10^18 bytes.
    if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); }))
      return FramingError{400, "invalid Content-Length '" + shown(v) + "'"};
    if (i == 0) first = v;
    else if (v != first) return FramingError{400, "conflicting Content-Length values"};
  }
  const int64_t n = std::stoll(first);  // <= 18 digits: fits
  // httplib reads a body only for these methods: any other one's body would be parsed as the
  // next request on the connection.
  const bool reads_body = q.method == "POST" || q.method == "PUT" || q.method == "PATCH" || q.method == "DELETE";
  if (n > 0 && !reads_body) return FramingError{400, "a " + q.method + " request carries no body"};
  if (n > max_body_bytes)
    return FramingError{413, "request body of " + std::to_string(n) + " bytes exceeds this server's limit of " +
                                 std::to_string(max_body_bytes)};
  return std::nullopt;
}

namespace {
bool is_token(const std::string& s);
}

std::optional<FramingError> check_header_fields(const httplib::Request& q) {
  for (const auto& [name, value] : q.headers) {
    if (!is_token(name)) return FramingError{400, "invalid header name '" + shown(name) + "'"};
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        char code[8];
        std::snprintf(code, sizeof code, "0x%02x", c);
        return FramingError{400, "header '" + shown(name) + "' contains a control character (" + code + ")"};
      }
  }
  return std::nullopt;
}

const char* const kCorsAllowHeaders =
    "authorization, content-type, accept, x-api-key, anthropic-version, anthropic-beta, "
    "anthropic-dangerous-direct-browser-access, openai-organization, openai-project, openai-beta, idempotency-key, "
    "x-stainless-arch, x-stainless-async, x-stainless-custom-poll-interval, x-stainless-helper-method, x-stainless-lang, "
    "x-stainless-os, x-stainless-package-version, x-stainless-poll-helper, x-stainless-retry-count, x-stainless-runtime, "
    "x-stainless-runtime-version, x-stainless-timeout";

std::string cors_allow_headers(const httplib::Request& q) {
  const std::string asked = q.get_header_value("Access-Control-Request-Headers");
  const bool plain = !asked.empty() && asked.size() <= 4096 && std::all_of(asked.begin(), asked.end(), [](unsigned char c) {
    return c == ',' || c == ' ' || c == '\t' || is_token(std::string(1, char(c)));
  });
  return plain ? asked : kCorsAllowHeaders;
}

bool implemented_method(const std::string& m) { return m == "GET" || m == "HEAD" || m == "POST" || m == "OPTIONS"; }

std::optional<FramingError> check_method(const httplib::Request& q) {
  if (implemented_method(q.method)) return std::nullopt;
  return FramingError{501, "method '" + shown(q.method) + "' is not implemented by this server (GET, HEAD, POST, OPTIONS)"};
}

bool declares_body(const httplib::Request& q) {
  return q.has_header("Transfer-Encoding") || (q.has_header("Content-Length") && q.get_header_value("Content-Length") != "0");
}

std::string request_path(const httplib::Request& q) {
  return q.path.empty() ? q.target.substr(0, q.target.find('?')) : q.path;
}

namespace {
// RFC 9110 token characters (a method is a token).
bool is_token(const std::string& s) {
  static const std::string extra = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || extra.find(char(c)) != std::string::npos;
  });
}

// The methods httplib 0.11 parses; it refuses any other one's request line with a 400.
bool httplib_parses(const std::string& m) {
  static const char* known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
  return std::any_of(std::begin(known), std::end(known), [&](const char* k) { return m == k; });
}

// "HTTP/<digit>.<digit>": a well-formed version httplib refused for not being 1.0 or 1.1.
bool other_http_version(const std::string& v) {
  return v.size() == 8 && v.rfind("HTTP/", 0) == 0 && std::isdigit((unsigned char)v[5]) && v[6] == '.' &&
         std::isdigit((unsigned char)v[7]) && v != "HTTP/1.0" && v != "HTTP/1.1";
}
}  // namespace

FramingError httplib_error(const httplib::Request& q, int status) {
  switch (status) {
    case 404: return {404, "no such route: " + q.path};
    case 413: return {413, "request body too large"};
    case 414: return {414, "request target longer than " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) + " bytes"};
    case 416: return {416, "requested range not satisfiable"};
    case 400:
      // httplib sets method, target and version from a request line of three parts before it
      // checks them: a refused one leaves the version set.
      if (!q.version.empty() && is_token(q.method)) {
        if (!httplib_parses(q.method)) return check_method(q).value();
        if (other_http_version(q.version))
          return {505, "HTTP version '" + shown(q.version) + "' is not supported (HTTP/1.0 and HTTP/1.1)"};
      }
      return {400, "malformed request (request line, headers or body)"};
    default: return {status, "HTTP error"};
  }
}

}  // namespace ds4::server
