#pragma once
// The GPU canary's host side (SPEC §6): a tiny probe job is launched every `period` while
// the engine runs, its latency (launch to observed completion) goes into a bounded ring,
// and a probe pending longer than `stall` is a stall. Device-free: the probe is an
// interface (backend/cuda/canary.h: a kernel on its own stream) and the clock is
// injectable, so the statistics and the stall rule are tested on the CPU with a fake probe.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ds4 {

// One probe in flight at a time. launch(): enqueue the job; done(): has it completed
// (non-blocking). Throws ds4::Error on a device error.
class CanaryProbe {
 public:
  virtual ~CanaryProbe() = default;
  virtual void launch() = 0;
  virtual bool done() = 0;
};

// Latency percentiles over a window of samples, milliseconds. samples == 0: no probe
// completed in the window (percentiles 0); stalls counts probes that passed `stall`.
struct CanaryStats {
  int64_t samples = 0;
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
  int64_t stalls = 0;
};

// Nearest-rank percentile (p in (0, 100]) of unsorted values; 0 when empty.
double percentile_nearest_rank(std::vector<double> values, double p);
CanaryStats canary_stats(const std::vector<double>& latencies_ms, int64_t stalls);

// Lifetime totals for /metrics: a cumulative histogram over kCanaryBucketsMs.
inline constexpr double kCanaryBucketsMs[] = {1, 2, 5, 10, 20, 50, 100, 500, 2000};
inline constexpr size_t kCanaryBuckets = sizeof(kCanaryBucketsMs) / sizeof(double);
struct CanaryTotals {
  uint64_t count = 0;
  double sum_ms = 0;
  uint64_t le[kCanaryBuckets] = {};  // le[i]: samples <= kCanaryBucketsMs[i]
  uint64_t stalls = 0;
};

class CanaryMonitor {
 public:
  struct Options {
    double period_s = 0.1;
    double stall_s = 2.0;
    size_t capacity = 4096;  // samples kept; a turn longer than capacity * period sees the last ones
    std::function<double()> clock;  // seconds, monotonic; empty = steady_clock
  };
  // Where a turn started: stats and stalls after this point belong to the turn.
  struct Mark {
    uint64_t sample = 0, stalls = 0;
  };

  CanaryMonitor(std::unique_ptr<CanaryProbe> probe, Options o);
  virtual ~CanaryMonitor();
  CanaryMonitor(const CanaryMonitor&) = delete;
  CanaryMonitor& operator=(const CanaryMonitor&) = delete;

  // Background thread calling tick(); idempotent. stop() joins it.
  void start();
  void stop();
  // One step at clock(): records a completed probe, flags a probe pending past stall_s
  // (once per probe), launches the next one when period_s passed since the last launch.
  // Public so tests drive it with a fake clock; the thread only calls this.
  void tick();

  // Inactive: no new probes (a pending one is still completed and recorded). The engine
  // turns the canary off while it has no work, so the histogram measures inference only.
  void set_active(bool on) { active_.store(on); }

  Mark mark() const;
  // Samples recorded after `from` (at most the last `capacity`) and stalls flagged by
  // tick() since `from` (a probe still pending past stall_s counts). No mark: all kept.
  CanaryStats snapshot(Mark from) const;
  CanaryStats snapshot() const { return snapshot(Mark{}); }
  bool stalled_since(Mark from) const;
  CanaryTotals totals() const;
  double stall_s() const { return o_.stall_s; }

 private:
  double now() const;
  void record(double latency_ms);
  void loop();

  std::unique_ptr<CanaryProbe> probe_;
  Options o_;
  mutable std::mutex mu_;
  std::vector<double> ring_;  // latencies (ms); sample n lives at ring_[n % capacity]
  uint64_t next_sample_ = 0;
  CanaryTotals totals_;
  bool pending_ = false, pending_stalled_ = false;
  double launched_at_ = 0;
  bool launched_once_ = false;
  bool failed_ = false;  // the probe threw: no more probes (reported once on stderr)
  std::atomic<bool> active_{true};

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace ds4
