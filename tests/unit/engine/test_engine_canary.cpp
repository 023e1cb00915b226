// The engine with a GPU canary (EngineOptions::canary) driven by a fake probe and clock:
// per-turn latencies in the receipt, a stall aborts the live turn and the next one is
// served, lifetime totals in the metrics; without a canary the fields are absent.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "engine_test_util.h"
#include "support/fake_canary.h"

namespace ds4::engine {
namespace {

// Never completes: the GPU is "hung" until the test moves the clock past the stall limit.
struct StuckProbe : CanaryProbe {
  std::atomic<bool>* launched;
  explicit StuckProbe(std::atomic<bool>* l) : launched(l) {}
  void launch() override { launched->store(true); }
  bool done() override { return false; }
};

std::shared_ptr<CanaryMonitor> monitor(std::unique_ptr<CanaryProbe> p, std::atomic<double>* clock, double period_s) {
  CanaryMonitor::Options o;
  o.period_s = period_s;
  o.clock = [clock] { return clock->load(); };
  return std::make_shared<CanaryMonitor>(std::move(p), o);
}

TEST(EngineCanary, TurnReceiptHasTheCanaryLatencies) {
  std::atomic<double> clock{10.0};
  EngineOptions o;
  o.canary = testmodel::fixed_latency_canary(&clock, 0.005);
  auto e = make_engine(std::chrono::microseconds(2000), "qwen_test", o);
  auto req = chat({user("hello there")});
  req.max_tokens = 20;
  auto r = collect(*e->submit(req));
  ASSERT_TRUE(r.done.usage.gpu_canary.has_value());
  const CanaryStats& s = *r.done.usage.gpu_canary;
  EXPECT_GE(s.samples, 1);
  EXPECT_NEAR(s.p50_ms, 5.0, 1e-6);
  EXPECT_NEAR(s.p99_ms, 5.0, 1e-6);
  EXPECT_NEAR(s.max_ms, 5.0, 1e-6);
  EXPECT_EQ(s.stalls, 0);
  auto m = e->metrics();
  ASSERT_TRUE(m.canary.has_value());
  EXPECT_GE(m.canary->count, uint64_t(s.samples));
  EXPECT_EQ(m.canary->stalls, 0u);
  EXPECT_EQ(m.canary_aborts, 0u);
}

TEST(EngineCanary, StallAbortsTheTurnAndTheEngineKeepsServing) {
  std::atomic<double> clock{0.0};
  std::atomic<bool> launched{false};
  EngineOptions o;
  o.canary = monitor(std::make_unique<StuckProbe>(&launched), &clock, 0.1);
  // 200 tokens at 20 ms each: the turn is still running when the clock jumps.
  auto e = make_engine(std::chrono::microseconds(20000), "qwen_test", o);
  auto h = e->submit(chat({user("a long answer please")}));
  for (;;) {  // wait until the turn runs (its canary mark is taken by then)
    auto ev = h->next(10s);
    ASSERT_TRUE(ev.has_value());
    ASSERT_NE(ev->kind, GenEvent::Kind::kDone);
    if (ev->kind == GenEvent::Kind::kStarted) break;
  }
  // The engine turned the canary on with the turn: its probe goes out at clock 0.
  while (!launched.load()) std::this_thread::yield();
  clock.store(2.5);  // the probe launched at 0 has now waited 2.5 s > 2 s
  std::optional<GenEvent> err;
  for (;;) {
    auto ev = h->next(10s);
    ASSERT_TRUE(ev.has_value());
    ASSERT_NE(ev->kind, GenEvent::Kind::kDone) << "the turn finished instead of being aborted";
    if (ev->kind == GenEvent::Kind::kError) {
      err = ev;
      break;
    }
  }
  EXPECT_NE(err->text.find("GPU stall"), std::string::npos) << err->text;
  ASSERT_TRUE(err->usage.gpu_canary.has_value());
  EXPECT_EQ(err->usage.gpu_canary->stalls, 1);
  EXPECT_EQ(err->usage.gpu_canary->samples, 0);

  // The next turn is served: the stall happened before it began.
  auto req = chat({user("short")});
  req.max_tokens = 3;
  auto r = collect(*e->submit(req));
  ASSERT_TRUE(r.done.usage.gpu_canary.has_value());
  EXPECT_EQ(r.done.usage.gpu_canary->stalls, 0);
  auto m = e->metrics();
  EXPECT_EQ(m.canary_aborts, 1u);
  EXPECT_EQ(m.requests_failed, 1u);
  ASSERT_TRUE(m.canary.has_value());
  EXPECT_EQ(m.canary->stalls, 1u);
}

TEST(EngineCanary, AbsentWithoutACanary) {
  auto e = make_engine();
  auto req = chat({user("hello")});
  req.max_tokens = 3;
  auto r = collect(*e->submit(req));
  EXPECT_FALSE(r.done.usage.gpu_canary.has_value());
  EXPECT_FALSE(e->metrics().canary.has_value());
}

}  // namespace
}  // namespace ds4::engine
