#pragma once
// The server's routes, registered with httplib through this table so that the methods each
// path takes are known: httplib alone answers a known path asked with another method with 404
// (no route for that method); RFC 9110 wants 405 and an Allow header naming the methods.
#include <httplib.h>

#include <string>
#include <vector>

namespace ds4::server {

class Routes {
 public:
  explicit Routes(httplib::Server& svr) : svr_(svr) {}
  // httplib patterns, as httplib::Server::Get / Post take them: an exact path, or a path
  // ending in one segment parameter "([^/]+)" (the only forms the routes use; others throw).
  void get(const std::string& pattern, httplib::Server::Handler h);
  void post(const std::string& pattern, httplib::Server::Handler h);
  // The Allow value of `path` ("GET, HEAD, OPTIONS", "POST, OPTIONS"); "" when no route matches.
  std::string allowed(const std::string& path) const;
  // Whether a route takes `method` on `path` (HEAD with GET; OPTIONS on every known path).
  bool allows(const std::string& path, const std::string& method) const;

 private:
  struct Route {
    std::string prefix;  // the exact path, or what precedes the segment parameter
    bool segment = false;
    std::string method;
    bool matches(const std::string& path) const;
  };
  void add(const std::string& pattern, const char* method);
  httplib::Server& svr_;
  std::vector<Route> routes_;
};

}  // namespace ds4::server
