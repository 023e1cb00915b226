// In-process server on 127.0.0.1 (any free port) with the scripted test model, driven by
// httplib's client: auth, both protocols' error shapes, a chat round trip, shutdown.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/conn_guard.h"
#include "server/server.h"
#include "support/test_codec.h"
#include "support/test_model.h"

using namespace ds4;
using nlohmann::json;

TEST(Server, ConstantTimeEqual) {
  EXPECT_TRUE(server::constant_time_equal("abc", "abc"));
  EXPECT_FALSE(server::constant_time_equal("abc", "abd"));
  EXPECT_FALSE(server::constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(server::constant_time_equal("", "a"));
  EXPECT_TRUE(server::constant_time_equal("", ""));
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    settings.port = 0;
    settings.api_key = "k1";
    settings.thinking = "off";
    settings.header_timeout_s = 1;  // the guard's deadline cases end quickly
    engine = std::make_unique<engine::Engine>(model(), std::make_unique<testmodel::TestCodec>(), options());
    srv = std::make_unique<server::Server>(*engine, settings, "receipt: yes\n");
    port = srv->bind();
    thread = std::thread([this] { srv->serve(); });
  }
  void TearDown() override {
    srv->stop();
    thread.join();
  }
  virtual std::unique_ptr<Model> model() { return std::make_unique<testmodel::TestModel>(); }
  virtual engine::EngineOptions options() { return {}; }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
  engine::Settings settings;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<server::Server> srv;
  std::thread thread;
  int port = 0;
};

TEST_F(ServerTest, AuthAndRoundTrip) {
  auto c = client();
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}]})";
  auto r = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "invalid_api_key");
  r = c.Post("/v1/messages", {{"x-api-key", "k2"}}, body, "application/json");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  r = c.Post("/v1/chat/completions", {{"Authorization", "Bearer k1"}}, body, "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Echo: hi. Done.");
  r = c.Post("/v1/messages", {{"x-api-key", "k1"}}, R"({"max_tokens":50,"messages":[{"role":"user","content":"yo"}]})",
             "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["content"][0]["text"], "Echo: yo. Done.");
  r = c.Get("/health");
  EXPECT_EQ(json::parse(r->body)["settings"], "receipt: yes\n");
}

TEST_F(ServerTest, ErrorShapesPerProtocol) {
  auto c = client();
  httplib::Headers h = {{"x-api-key", "k1"}};
  auto r = c.Post("/v1/chat/completions", h, "{oops", "application/json");
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(json::parse(r->body)["error"].contains("message"));
  r = c.Post("/v1/messages", h, R"({"max_tokens":"ten","messages":[{"role":"user","content":"x"}]})", "application/json");
  EXPECT_EQ(r->status, 400);
  auto j = json::parse(r->body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
}

// Admission control through the server: the scripted model's states cost 4096 bytes + 4 per
// token (its bytes()); under a budget of 4096 + 4 * 1000 a turn asking for 5000 tokens could
// never fit and is answered 507 in both protocols, and the next turn is served.
class CostedTestModel : public testmodel::TestModel {
 public:
  StateCost state_cost(bool) override { return {4096, 4}; }
};
class ServerCapacityTest : public ServerTest {
 protected:
  std::unique_ptr<Model> model() override { return std::make_unique<CostedTestModel>(); }
  engine::EngineOptions options() override {
    engine::EngineOptions o;
    o.state_memory_bytes = 4096 + 4 * 1000;
    return o;
  }
};

TEST_F(ServerCapacityTest, ATurnThatCanNeverFitIs507AndServingGoesOn) {
  auto c = client();
  httplib::Headers h = {{"x-api-key", "k1"}};
  auto r = c.Post("/v1/chat/completions", h, R"({"max_tokens":5000,"messages":[{"role":"user","content":"hi"}]})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 507) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("state memory budget"), std::string::npos);
  r = c.Post("/v1/messages", h, R"({"max_tokens":5000,"messages":[{"role":"user","content":"hi"}]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 507) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "api_error");
  r = c.Post("/v1/chat/completions", h, R"({"max_tokens":50,"messages":[{"role":"user","content":"hi"}]})",
             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], "Echo: hi. Done.");
  r = c.Get("/metrics", h);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("ds4_state_memory_budget_bytes 8096"), std::string::npos);
  EXPECT_NE(r->body.find("ds4_preemptions_total 0"), std::string::npos);
  EXPECT_NE(r->body.find("\nds4_paged_cache_bytes 0\n"), std::string::npos) << "the echo model pages nothing";
}

TEST_F(ServerTest, MetricsRouteLabelsAreTheServersOwnNeverTheClientsPath) {
  auto c = client();
  httplib::Headers h = {{"x-api-key", "k1"}};
  // A path that would close the label and start a line of its own if it were copied into it.
  auto r = c.Get("/v1/zz%22%7D%201e9%0Ainjected_metric%7Bx%3D%22", h);
  ASSERT_TRUE(r);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c.Get("/v1/responses/resp_" + std::to_string(i), h));
  r = c.Get("/metrics", h);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find("injected_metric"), std::string::npos) << "a client's path became a metrics line";
  EXPECT_NE(r->body.find("ds4_http_requests_total{route=\"/v1/other\""), std::string::npos);
  EXPECT_EQ(r->body.find("resp_1"), std::string::npos) << "ids must not become series";
  EXPECT_NE(r->body.find("route=\"/v1/responses/{id}\""), std::string::npos);
}

TEST_F(ServerTest, DeeplyNestedJsonIsA400NotACrash) {
  auto c = client();
  httplib::Headers h = {{"x-api-key", "k1"}};
  const std::string deep = std::string(3000, '[') + std::string(3000, ']');
  const std::string chat = R"({"max_tokens":2,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
                           R"("function":{"name":"f","parameters":{"x":)" + deep + "}}}]}";
  auto r = c.Post("/v1/chat/completions", h, chat, "application/json");
  ASSERT_TRUE(r) << "the server must answer, not crash";
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("deeper than"), std::string::npos);
  r = c.Post("/v1/messages", h,
             R"({"max_tokens":2,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":)" + deep +
                 "}]}",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["type"], "error");
  // Still serving.
  r = c.Post("/v1/chat/completions", h, R"({"max_tokens":50,"messages":[{"role":"user","content":"hi"}]})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// httplib answers its own read timeout with a bare 400; the guard's deadlines must come first
// (a stalled body was a 400 after 30 s under the default 60 s body deadline).
TEST(Server, ReadTimeoutBacksUpTheGuardsDeadlines) {
  server::GuardLimits g;
  g.header_timeout_s = 10;
  g.body_timeout_s = 60;
  EXPECT_EQ(server::backstop_read_timeout_s(g), 65);
  g.header_timeout_s = 90;
  g.body_timeout_s = 2;
  EXPECT_EQ(server::backstop_read_timeout_s(g), 95);
}

TEST(Server, ExposureWarning) {
  engine::Settings s;
  s.host = "127.0.0.1";
  EXPECT_EQ(server::exposure_warning(s), "");
  s.host = "::1";
  EXPECT_EQ(server::exposure_warning(s), "");
  s.host = "0.0.0.0";
  EXPECT_NE(server::exposure_warning(s).find("without an API key"), std::string::npos);
  s.host = "192.168.1.5";
  EXPECT_NE(server::exposure_warning(s).find("192.168.1.5"), std::string::npos);
  s.api_key = "k";
  EXPECT_EQ(server::exposure_warning(s), "");
}

TEST_F(ServerTest, HealthCarriesNoWarningOnLoopback) {
  auto r = client().Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(json::parse(r->body).contains("warnings"));
}

namespace {
// Raw bytes to the server; everything it sends until it closes (the socket's own 20 s receive
// timeout bounds a server that would never close).
std::string raw_exchange(int port, const std::string& data) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "";
  }
  send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, size_t(n));
  close(fd);
  return out;
}
}  // namespace

// The connection guard in process (CI runs this under ASan/UBSan): a header block that never
// completes gets a 408 and the close; bad framing is answered without waiting for a body; a
// refused body is not read as a second request.
TEST_F(ServerTest, GuardAnswersAndCloses) {
  std::string out = raw_exchange(port, "GET /health HTTP/1.1\r\nHost: t\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 408 ", 0), 0u) << out;
  out = raw_exchange(port, "POST /v1/messages HTTP/1.1\r\nHost: t\r\nx-api-key: k1\r\nContent-Length: 999999999\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 413 ", 0), 0u) << out;
  EXPECT_NE(out.find("request_too_large"), std::string::npos) << out;  // Anthropic's error shape
  out = raw_exchange(port, "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 501 ", 0), 0u) << out;
  const std::string inner = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
  out = raw_exchange(port, "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(inner.size()) +
                               "\r\n\r\n" + inner);
  EXPECT_EQ(out.rfind("HTTP/1.1 401 ", 0), 0u) << out;
  EXPECT_EQ(out.find("HTTP/1.1", 1), std::string::npos) << out;  // one answer: the body was no request
  auto r = client().Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("ds4_http_header_timeouts_total 1"), std::string::npos);
}

// An error after an SSE stream has begun (200 and the first events sent) ends the stream with
// an error event in the API's own shape. The model fails deterministically: every 4th
// one-token (decode) forward throws, which the engine turns into the turn's error event
// (Engine::fail), so each streamed turn sends its first tokens and then fails.
class FailingDecodeModel : public testmodel::TestModel {
 public:
  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override {
    if (tokens.size() == 1 && ++decode_steps_ % 4 == 0) throw std::runtime_error("injected decode fault");
    TestModel::forward(state, tokens, mode, logits);
  }

 private:
  std::atomic<int> decode_steps_{0};
};
class ServerStreamFaultTest : public ServerTest {
 protected:
  std::unique_ptr<Model> model() override { return std::make_unique<FailingDecodeModel>(); }
};

namespace {
struct SseEvent {
  std::string event;  // "" without an event: line
  std::string data;
};
std::vector<SseEvent> sse_events(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  for (size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    SseEvent e;
    const std::string block = body.substr(pos, end - pos);
    for (size_t a = 0; a <= block.size();) {
      size_t b = block.find('\n', a);
      if (b == std::string::npos) b = block.size();
      const std::string line = block.substr(a, b - a);
      if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data = line.substr(6);
      a = b + 1;
    }
    if (!e.data.empty()) out.push_back(e);  // keepalive comments carry no data
  }
  EXPECT_EQ(pos, body.size()) << "the stream ends with a whole event: " << body;
  return out;
}
}  // namespace

TEST_F(ServerStreamFaultTest, AnErrorMidStreamEndsItWithTheApisErrorEvent) {
  auto c = client();
  httplib::Headers h = {{"x-api-key", "k1"}};
  // OpenAI chat: chunks, then {"error": {...}} and [DONE].
  auto r = c.Post("/v1/chat/completions", h, R"({"stream":true,"messages":[{"role":"user","content":"hi"}]})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 3u) << r->body;
  EXPECT_EQ(json::parse(ev[0].data)["object"], "chat.completion.chunk") << "the stream had begun";
  EXPECT_EQ(json::parse(ev[ev.size() - 2].data),
            json::parse(R"({"error":{"message":"injected decode fault","type":"server_error","param":null,"code":null}})"));
  EXPECT_EQ(ev.back().data, "[DONE]");
  // (/v1/completions ends a failed stream through the same error_in_stream as chat; the
  // scripted model answers a raw prompt, which has no chat turn, with end-of-turn at once.)
  // Anthropic: message_start first, then "event: error" in Anthropic's shape, last.
  r = c.Post("/v1/messages", h, R"({"stream":true,"max_tokens":50,"messages":[{"role":"user","content":"yo"}]})",
             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 2u) << r->body;
  EXPECT_EQ(ev.front().event, "message_start");
  EXPECT_EQ(ev.back().event, "error");
  EXPECT_EQ(json::parse(ev.back().data),
            json::parse(R"({"type":"error","error":{"type":"api_error","message":"injected decode fault"}})"));
  // Responses: response.created first, then "event: error", last.
  r = c.Post("/v1/responses", h, R"({"stream":true,"input":"hey"})", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 2u) << r->body;
  EXPECT_EQ(ev.front().event, "response.created");
  EXPECT_EQ(ev.back().event, "error");
  EXPECT_EQ(json::parse(ev.back().data),
            json::parse(R"({"type":"error","code":"server_error","message":"injected decode fault","param":null})"));
}
