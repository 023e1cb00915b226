// GPU canary host side (core/canary_monitor.h) with a fake probe and an injected clock:
// percentiles, the bounded ring, per-turn windows, stall detection, /metrics totals.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/canary_monitor.h"
#include "core/error.h"

using namespace ds4;

namespace {

// Completes when the test says so; counts launches.
struct FakeProbe : CanaryProbe {
  int launches = 0;
  bool complete = false;
  bool throw_on_launch = false;
  bool instant = false;  // every probe completes at once
  void launch() override {
    if (throw_on_launch) throw Error("fake device lost");
    ++launches;
    complete = instant;
  }
  bool done() override { return complete; }
};

struct Rig {
  double t = 100.0;
  FakeProbe* probe;
  std::unique_ptr<CanaryMonitor> mon;
  explicit Rig(size_t capacity = 4096) {
    auto p = std::make_unique<FakeProbe>();
    probe = p.get();
    CanaryMonitor::Options o;
    o.capacity = capacity;
    o.clock = [this] { return t; };
    mon = std::make_unique<CanaryMonitor>(std::move(p), o);
  }
  // One probe that takes `ms` from launch to completion; the next launch is due after it.
  void probe_taking(double ms) {
    mon->tick();  // launches (period passed)
    t += ms / 1e3;
    probe->complete = true;
    mon->tick();  // records
    t += 0.1;     // next period
  }
};

TEST(CanaryMonitor, PercentileNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // 1..100, unsorted
  EXPECT_EQ(percentile_nearest_rank(v, 50), 50);
  EXPECT_EQ(percentile_nearest_rank(v, 95), 95);
  EXPECT_EQ(percentile_nearest_rank(v, 99), 99);
  EXPECT_EQ(percentile_nearest_rank(v, 100), 100);
  EXPECT_EQ(percentile_nearest_rank({7, 3, 5}, 50), 5);  // rank ceil(1.5) = 2
  EXPECT_EQ(percentile_nearest_rank({7, 3, 5}, 99), 7);
  EXPECT_EQ(percentile_nearest_rank({4}, 50), 4);
  EXPECT_EQ(percentile_nearest_rank({}, 50), 0);
}

TEST(CanaryMonitor, LaunchesEveryPeriodAndRecordsLatency) {
  Rig r;
  r.mon->tick();
  EXPECT_EQ(r.probe->launches, 1);
  r.t += 0.003;
  r.mon->tick();  // not done: still pending, no new launch
  EXPECT_EQ(r.probe->launches, 1);
  r.probe->complete = true;
  r.mon->tick();  // completes at +3 ms
  r.mon->tick();  // period not yet passed
  EXPECT_EQ(r.probe->launches, 1);
  r.t += 0.098;
  r.mon->tick();
  EXPECT_EQ(r.probe->launches, 2);
  auto s = r.mon->snapshot();
  EXPECT_EQ(s.samples, 1);
  EXPECT_NEAR(s.max_ms, 3.0, 1e-6);
  EXPECT_NEAR(s.p50_ms, 3.0, 1e-6);
  EXPECT_EQ(s.stalls, 0);
}

TEST(CanaryMonitor, TurnWindowAndPercentiles) {
  Rig r;
  r.probe_taking(50);  // before the turn: not in its window
  auto m = r.mon->mark();
  for (int ms = 1; ms <= 20; ++ms) r.probe_taking(ms);
  auto s = r.mon->snapshot(m);
  EXPECT_EQ(s.samples, 20);
  EXPECT_NEAR(s.p50_ms, 10, 1e-6);
  EXPECT_NEAR(s.p95_ms, 19, 1e-6);
  EXPECT_NEAR(s.p99_ms, 20, 1e-6);
  EXPECT_NEAR(s.max_ms, 20, 1e-6);
  EXPECT_EQ(r.mon->snapshot().samples, 21);
  EXPECT_NEAR(r.mon->snapshot().max_ms, 50, 1e-6);
}

TEST(CanaryMonitor, RingKeepsOnlyTheLastCapacitySamples) {
  Rig r(/*capacity=*/4);
  for (double ms : {90.0, 80.0, 0.5, 1.5, 3.0, 4.0}) r.probe_taking(ms);
  auto s = r.mon->snapshot();
  EXPECT_EQ(s.samples, 4);
  EXPECT_NEAR(s.max_ms, 4, 1e-6);  // 90 and 80 were overwritten
  EXPECT_NEAR(s.p50_ms, 1.5, 1e-6);
  // Lifetime totals keep everything: histogram over all six.
  auto t = r.mon->totals();
  EXPECT_EQ(t.count, 6u);
  EXPECT_NEAR(t.sum_ms, 179, 1e-6);
  EXPECT_EQ(t.le[0], 1u);  // <= 1 ms
  EXPECT_EQ(t.le[1], 2u);  // <= 2 ms
  EXPECT_EQ(t.le[2], 4u);  // <= 5 ms
  EXPECT_EQ(t.le[5], 4u);  // <= 50 ms
  EXPECT_EQ(t.le[6], 6u);  // <= 100 ms
}

TEST(CanaryMonitor, StallOverTwoSecondsIsFlaggedOnceAndRecorded) {
  Rig r;
  auto m = r.mon->mark();
  r.mon->tick();  // launch
  r.t += 1.9;
  r.mon->tick();
  EXPECT_FALSE(r.mon->stalled_since(m));
  r.t += 0.2;  // 2.1 s pending
  r.mon->tick();
  EXPECT_TRUE(r.mon->stalled_since(m));
  EXPECT_EQ(r.mon->snapshot(m).stalls, 1);
  EXPECT_EQ(r.mon->snapshot(m).samples, 0);  // still pending
  r.t += 1.0;
  r.mon->tick();  // still pending: not counted again
  EXPECT_EQ(r.mon->totals().stalls, 1u);
  r.probe->complete = true;
  r.mon->tick();  // completes at 3.1 s
  auto s = r.mon->snapshot(m);
  EXPECT_EQ(s.samples, 1);
  EXPECT_NEAR(s.max_ms, 3100, 1e-6);
  // A later turn does not inherit the stall.
  auto m2 = r.mon->mark();
  EXPECT_FALSE(r.mon->stalled_since(m2));
  EXPECT_EQ(r.mon->snapshot(m2).stalls, 0);
}

TEST(CanaryMonitor, InactiveLaunchesNothingButFinishesThePendingProbe) {
  Rig r;
  r.mon->tick();  // launch
  r.mon->set_active(false);
  r.t += 0.004;
  r.probe->complete = true;
  r.mon->tick();  // recorded even while inactive
  r.t += 1.0;
  r.mon->tick();  // due, but inactive
  EXPECT_EQ(r.probe->launches, 1);
  EXPECT_EQ(r.mon->snapshot().samples, 1);
  r.mon->set_active(true);
  r.mon->tick();
  EXPECT_EQ(r.probe->launches, 2);
}

TEST(CanaryMonitor, ExactlyTwoSecondsIsNotAStall) {
  Rig r;
  r.mon->tick();
  r.t += 2.0;
  r.mon->tick();
  EXPECT_EQ(r.mon->totals().stalls, 0u);
}

TEST(CanaryMonitor, ProbeErrorTurnsTheCanaryOff) {
  Rig r;
  r.probe->throw_on_launch = true;
  r.mon->tick();  // reports on stderr, no throw
  r.probe->throw_on_launch = false;
  r.t += 1.0;
  r.mon->tick();
  EXPECT_EQ(r.probe->launches, 0);
  EXPECT_EQ(r.mon->snapshot().samples, 0);
}

TEST(CanaryMonitor, RejectsBadOptions) {
  CanaryMonitor::Options o;
  o.capacity = 0;
  EXPECT_THROW(CanaryMonitor(std::make_unique<FakeProbe>(), o), InputError);
  o.capacity = 8;
  o.stall_s = 0;
  EXPECT_THROW(CanaryMonitor(std::make_unique<FakeProbe>(), o), InputError);
}

TEST(CanaryMonitor, ThreadStartsAndStops) {
  // Real clock, probe completes at once: the thread launches at least once and stops cleanly.
  auto p = std::make_unique<FakeProbe>();
  FakeProbe* probe = p.get();
  probe->instant = true;
  CanaryMonitor::Options o;
  o.period_s = 0.001;
  CanaryMonitor mon(std::move(p), o);
  mon.start();
  mon.start();  // idempotent
  while (mon.totals().count == 0) std::this_thread::yield();
  mon.stop();
  mon.stop();
  EXPECT_GE(probe->launches, 1);
}

}  // namespace
