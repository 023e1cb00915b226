// The GPU canary through the HTTP server: usage.gpu_canary in both protocols' receipts and
// the /metrics histogram, from an engine whose canary has a fake probe of exactly 5 ms;
// without a canary both are absent (not zeros).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/api_common.h"
#include "server/server.h"
#include "support/fake_canary.h"
#include "support/test_codec.h"
#include "support/test_model.h"

using namespace ds4;
using nlohmann::json;

namespace {

struct Running {
  std::atomic<double> clock{1.0};
  engine::Settings settings;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<server::Server> srv;
  std::thread thread;
  int port = 0;
  explicit Running(bool canary) {
    settings.port = 0;
    settings.thinking = "off";
    engine::EngineOptions o;
    if (canary) o.canary = testmodel::fixed_latency_canary(&clock, 0.005);
    // 2 ms per forward: the canary completes probes while the turn runs.
    engine = std::make_unique<engine::Engine>(
        std::make_unique<testmodel::TestModel>("qwen_test", 4096, std::chrono::microseconds(2000)),
        std::make_unique<testmodel::TestCodec>(), o);
    srv = std::make_unique<server::Server>(*engine, settings, "receipt: yes\n", "test backend");
    port = srv->bind();
    thread = std::thread([this] { srv->serve(); });
  }
  ~Running() {
    srv->stop();
    thread.join();
  }
  json post(const char* path, const std::string& body) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    auto r = c.Post(path, body, "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
  std::string get(const char* path) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get(path);
    EXPECT_TRUE(r);
    return r->body;
  }
};

const char* kChat = R"({"messages":[{"role":"user","content":"hi"}]})";
const char* kMessages = R"({"max_tokens":50,"messages":[{"role":"user","content":"yo"}]})";

void expect_five_ms(const json& usage) {
  ASSERT_TRUE(usage.contains("gpu_canary")) << usage.dump();
  const json& g = usage["gpu_canary"];
  EXPECT_GE(g["samples"].get<int64_t>(), 1);
  EXPECT_NEAR(g["p50_ms"].get<double>(), 5.0, 1e-6);
  EXPECT_NEAR(g["p95_ms"].get<double>(), 5.0, 1e-6);
  EXPECT_NEAR(g["p99_ms"].get<double>(), 5.0, 1e-6);
  EXPECT_NEAR(g["max_ms"].get<double>(), 5.0, 1e-6);
  EXPECT_EQ(g["stalls"], 0);
}

TEST(ServerCanary, UsageAndMetricsCarryTheCanary) {
  Running s(true);
  expect_five_ms(s.post("/v1/chat/completions", kChat)["usage"]);
  expect_five_ms(s.post("/v1/messages", kMessages)["usage"]);
  const std::string m = s.get("/metrics");
  EXPECT_NE(m.find("# TYPE ds4_gpu_canary_latency_seconds histogram"), std::string::npos) << m;
  EXPECT_NE(m.find("ds4_gpu_canary_latency_seconds_bucket{le=\"0.002\"} 0\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("ds4_gpu_canary_latency_seconds_bucket{le=\"0.01\"} 0\n"), std::string::npos) << m;  // 5 ms probes
  EXPECT_NE(m.find("ds4_gpu_canary_stalls_total 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("ds4_gpu_canary_aborted_turns_total 0\n"), std::string::npos) << m;
  auto h = json::parse(s.get("/health"));
  EXPECT_EQ(h["backend_reason"], "test backend");
}

TEST(ServerCanary, AbsentWithoutACanary) {
  Running s(false);
  EXPECT_FALSE(s.post("/v1/chat/completions", kChat)["usage"].contains("gpu_canary"));
  EXPECT_FALSE(s.post("/v1/messages", kMessages)["usage"].contains("gpu_canary"));
  EXPECT_EQ(s.get("/metrics").find("ds4_gpu_canary"), std::string::npos);
}

TEST(ServerCanary, UsageExtrasSerializesOnlyWhenPresent) {
  engine::Usage u;
  EXPECT_FALSE(server::usage_extras(u).contains("gpu_canary"));
  u.gpu_canary = CanaryStats{12, 1.5, 2.5, 3.5, 4.5, 1};
  const json j = server::usage_extras(u)["gpu_canary"];
  EXPECT_EQ(j, json({{"samples", 12}, {"p50_ms", 1.5}, {"p95_ms", 2.5}, {"p99_ms", 3.5}, {"max_ms", 4.5}, {"stalls", 1}}));
}

}  // namespace
