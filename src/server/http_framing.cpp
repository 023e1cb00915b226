#include "server/http_framing.h"

#include <algorithm>
#include <cctype>

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

std::optional<FramingError> check_framing(const httplib::Request& q, int64_t max_body_bytes) {
  const size_t te_count = q.get_header_value_count("Transfer-Encoding");
  const size_t cl_count = q.get_header_value_count("Content-Length");
  if (te_count > 1) return FramingError{400, "Transfer-Encoding given more than once"};
  if (te_count == 1) {
    const std::string te = trimmed_lower(q.get_header_value("Transfer-Encoding"));
    if (cl_count > 0) return FramingError{400, "both Content-Length and Transfer-Encoding given"};
    if (te == "chunked") return FramingError{411, "chunked request bodies are not accepted: send a Content-Length"};
    return FramingError{400, "unsupported Transfer-Encoding '" + shown(te) + "'"};
  }
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

}  // namespace ds4::server
