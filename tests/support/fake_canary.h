#pragma once
// A GPU canary for tests without a GPU (core/canary_monitor.h): every probe completes after
// exactly `latency_s` of a fake clock (done() advances it), and the monitor launches again at
// once, so each turn's percentiles are exactly that latency.
#include <atomic>
#include <memory>

#include "core/canary_monitor.h"

namespace ds4::testmodel {

struct FixedLatencyProbe : CanaryProbe {
  std::atomic<double>* clock;
  double latency_s;
  FixedLatencyProbe(std::atomic<double>* c, double l) : clock(c), latency_s(l) {}
  void launch() override {}
  bool done() override {
    clock->store(clock->load() + latency_s);
    return true;
  }
};

inline std::shared_ptr<CanaryMonitor> fixed_latency_canary(std::atomic<double>* clock, double latency_s) {
  CanaryMonitor::Options o;
  o.period_s = 1e-9;
  o.clock = [clock] { return clock->load(); };
  return std::make_shared<CanaryMonitor>(std::make_unique<FixedLatencyProbe>(clock, latency_s), o);
}

}  // namespace ds4::testmodel
