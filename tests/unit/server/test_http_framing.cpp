// check_framing: which header combinations are refused right after the headers, and how.
#include <gtest/gtest.h>

#include "server/http_framing.h"

using ds4::server::check_framing;

namespace {
httplib::Request post(std::initializer_list<std::pair<const char*, const char*>> headers) {
  httplib::Request q;
  q.method = "POST";
  for (const auto& [k, v] : headers) q.headers.emplace(k, v);
  return q;
}
int status(const httplib::Request& q) {
  auto e = check_framing(q, 1000);
  return e ? e->status : 0;
}
}  // namespace

TEST(HttpFraming, ContentLength) {
  EXPECT_EQ(status(post({{"Content-Length", "10"}})), 0);
  EXPECT_EQ(status(post({{"Content-Length", "1000"}})), 0);
  EXPECT_EQ(status(post({{"Content-Length", "1001"}})), 413);
  EXPECT_EQ(status(post({{"Content-Length", "99999999999999999999"}})), 400);  // 20 digits: not a size we parse
  // 19 digits past INT64_MAX once made stoll throw (a 500 that left the body unread on the
  // connection): refused before any conversion; 18 digits is a size, far over the limit.
  EXPECT_EQ(status(post({{"Content-Length", "9223372036854775808"}})), 400);
  EXPECT_EQ(status(post({{"Content-Length", "9999999999999999999"}})), 400);
  EXPECT_EQ(status(post({{"Content-Length", "999999999999999999"}})), 413);
  EXPECT_EQ(status(post({{"Content-Length", "-1"}})), 400);
  EXPECT_EQ(status(post({{"Content-Length", "1e3"}})), 400);
  EXPECT_EQ(status(post({{"Content-Length", ""}})), 400);
  EXPECT_EQ(status(post({{"Content-Length", "5"}, {"Content-Length", "5"}})), 0);
  EXPECT_EQ(status(post({{"Content-Length", "5"}, {"Content-Length", "6"}})), 400);
  EXPECT_EQ(status(post({})), 411);
  httplib::Request get;
  get.method = "GET";
  EXPECT_EQ(status(get), 0);
  get.headers.emplace("Content-Length", "0");
  EXPECT_EQ(status(get), 0);
  get.headers.clear();
  get.headers.emplace("Content-Length", "20");  // never read: it would be the next request
  EXPECT_EQ(status(get), 400);
}

TEST(HttpFraming, TransferEncoding) {
  EXPECT_EQ(status(post({{"Transfer-Encoding", "chunked"}})), 411);
  EXPECT_EQ(status(post({{"Transfer-Encoding", "gzip"}})), 501);  // a coding it does not understand (RFC 9112 §6.1)
  EXPECT_EQ(status(post({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}})), 400);
  EXPECT_EQ(status(post({{"Transfer-Encoding", "chunked"}, {"Content-Length", "3"}})), 400);
  auto e = check_framing(post({{"Transfer-Encoding", "x\"\\\x01y"}}), 1000);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "unsupported Transfer-Encoding 'x???y'");  // the client's bytes never raw
}

TEST(HttpFraming, Expect) {
  EXPECT_EQ(status(post({{"Content-Length", "3"}, {"Expect", "100-continue"}})), 0);
  EXPECT_EQ(status(post({{"Content-Length", "3"}, {"Expect", "100-Continue"}})), 0);  // case-insensitive
  auto e = check_framing(post({{"Content-Length", "3"}, {"Expect", "200-ok"}}), 1000);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 417);
  EXPECT_EQ(e->message, "unsupported expectation '200-ok' (only 100-continue)");
}

TEST(HttpFraming, Methods) {
  for (const char* m : {"GET", "HEAD", "POST", "OPTIONS"}) EXPECT_TRUE(ds4::server::implemented_method(m)) << m;
  httplib::Request q;
  q.method = "PATCH";
  auto e = ds4::server::check_method(q);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 501);
  EXPECT_EQ(e->message, "method 'PATCH' is not implemented by this server (GET, HEAD, POST, OPTIONS)");
}

// httplib's own answers: a request line it refused is told apart by what it had parsed.
TEST(HttpFraming, HttplibErrors) {
  using ds4::server::httplib_error;
  httplib::Request q;
  q.method = "PROPFIND";  // httplib parses method, target and version, then refuses the method
  q.target = "/v1/messages?x=1";
  q.version = "HTTP/1.1";
  EXPECT_EQ(httplib_error(q, 400).status, 501);
  EXPECT_EQ(ds4::server::request_path(q), "/v1/messages");
  q.method = "GET";
  q.version = "HTTP/2.0";
  auto e = httplib_error(q, 400);
  EXPECT_EQ(e.status, 505);
  EXPECT_EQ(e.message, "HTTP version 'HTTP/2.0' is not supported (HTTP/1.0 and HTTP/1.1)");
  q.version = "HTTP/1.1";  // a valid line: the headers or the body were bad
  EXPECT_EQ(httplib_error(q, 400).status, 400);
  q.method = "G@T";  // not a token: a malformed line, not a method
  q.version = "HTTP/2.0";
  EXPECT_EQ(httplib_error(q, 400).status, 400);
  httplib::Request garbage;  // one word: no version parsed
  garbage.method = "hello";
  EXPECT_EQ(httplib_error(garbage, 400).status, 400);
  EXPECT_EQ(httplib_error(q, 414).status, 414);
  q.path = "/nope";
  EXPECT_EQ(httplib_error(q, 404).message, "no such route: /nope");
}

TEST(HttpFraming, HeaderFields) {
  using ds4::server::check_header_fields;
  EXPECT_FALSE(check_header_fields(post({{"X-Ok", "a\tb ~\x80"}})));  // HTAB and obs-text are allowed
  httplib::Request nul = post({});
  nul.headers.emplace("X-Api-Key", std::string("ab\0cd", 5));  // a NUL inside the value
  auto e = check_header_fields(nul);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->message, "header 'X-Api-Key' contains a control character (0x00)");
  e = check_header_fields(post({{"X-A", "a\rb"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "header 'X-A' contains a control character (0x0d)");
  e = check_header_fields(post({{"X-A", "a\x7f"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "header 'X-A' contains a control character (0x7f)");
  e = check_header_fields(post({{"Bad Name", "v"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "invalid header name 'Bad Name'");
}

TEST(HttpFraming, HeaderBlock) {
  using namespace ds4::server;
  using B = HeaderBlock;
  EXPECT_EQ(classify_header_block("GET / HTTP/1.1\r\nHost: t\r\n"), B::kPartial);
  EXPECT_EQ(classify_header_block("GET / HTTP/1.1\r\nHost: t\r\n\r\n"), B::kIn);
  EXPECT_EQ(classify_header_block("GET / HTTP/1.1\r\nHost: t\r\n\r\nbody past the block"), B::kIn);
  EXPECT_EQ(classify_header_block("GET / HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n"), B::kTooLarge);
  std::string many = "GET / HTTP/1.1\r\n";
  while (many.size() <= kMaxHeaderBytes) many += "X-Pad: " + std::string(100, 'a') + "\r\n";
  EXPECT_EQ(classify_header_block(many + "\r\n"), B::kTooLarge);
  EXPECT_EQ(classify_header_block("GET /" + std::string(kMaxHeaderBytes, 'a')), B::kTargetTooLong);
  // A bare LF LF is no end of the block (httplib reads on past it): header lines after it count
  // toward the limit.
  std::string lf = "GET / HTTP/1.1\r\nA: b\r\n\n";
  EXPECT_EQ(classify_header_block(lf), B::kPartial);
  while (lf.size() <= kMaxHeaderBytes) lf += "x:y\r\n";
  EXPECT_EQ(classify_header_block(lf), B::kTooLarge);
  EXPECT_EQ(header_block_error(B::kTooLarge).status, 431);
  EXPECT_EQ(header_block_error(B::kTargetTooLong).status, 414);
  EXPECT_EQ(request_line_path("POST /v1/messages?beta=true HTTP/1.1\r\n"), "/v1/messages");
  EXPECT_EQ(request_line_path("POST /v1/mess"), "");
}
