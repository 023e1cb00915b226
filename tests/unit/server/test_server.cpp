// In-process server on 127.0.0.1 (any free port) with the scripted test model, driven by
// httplib's client: auth, both protocols' error shapes, a chat round trip, shutdown.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

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
    engine = std::make_unique<engine::Engine>(std::make_unique<testmodel::TestModel>(),
                                              std::make_unique<testmodel::TestCodec>(), engine::EngineOptions{});
    srv = std::make_unique<server::Server>(*engine, settings, "receipt: yes\n");
    port = srv->bind();
    thread = std::thread([this] { srv->serve(); });
  }
  void TearDown() override {
    srv->stop();
    thread.join();
  }
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
