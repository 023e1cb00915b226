#include "server/routes.h"

#include <stdexcept>
#include <string_view>

namespace ds4::server {

namespace {
constexpr std::string_view kSegment = "([^/]+)";
}

// The two pattern forms are matched here without std::regex: what httplib's regex match does
// for them, no more.
void Routes::add(const std::string& pattern, const char* method) {
  const bool segment = pattern.size() > kSegment.size() && pattern.ends_with(kSegment);
  const std::string prefix = segment ? pattern.substr(0, pattern.size() - kSegment.size()) : pattern;
  if (prefix.find_first_of("()[]{}*+?.\\|^$") != std::string::npos)
    throw std::logic_error("route pattern '" + pattern + "': only an exact path or a trailing ([^/]+)");
  routes_.push_back({prefix, segment, method});
}

bool Routes::Route::matches(const std::string& path) const {
  if (!segment) return path == prefix;
  return path.size() > prefix.size() && path.starts_with(prefix) && path.find('/', prefix.size()) == std::string::npos;
}

void Routes::get(const std::string& pattern, httplib::Server::Handler h) {
  add(pattern, "GET");
  svr_.Get(pattern, std::move(h));
}

void Routes::post(const std::string& pattern, httplib::Server::Handler h) {
  add(pattern, "POST");
  svr_.Post(pattern, std::move(h));
}

std::string Routes::allowed(const std::string& path) const {
  bool get = false, post = false;
  for (const auto& r : routes_)
    if (r.matches(path)) (r.method == "GET" ? get : post) = true;
  if (!get && !post) return "";
  // httplib answers HEAD with the GET handler; OPTIONS is answered for every known path.
  std::string out = get ? "GET, HEAD" : "";
  if (post) out += out.empty() ? "POST" : ", POST";
  return out + ", OPTIONS";
}

bool Routes::allows(const std::string& path, const std::string& method) const {
  const std::string& m = method == "HEAD" ? "GET" : method;
  for (const auto& r : routes_)
    if (r.matches(path) && (m == "OPTIONS" || r.method == m)) return true;
  return false;
}

}  // namespace ds4::server
