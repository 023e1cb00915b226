#pragma once
// In-graph kernel attribution for the CUDA benches (DS4_KERNEL_TRACE=1; issues #22 / #23 / #24).
// The per-op tables (direct launches + events) and ncu (--graph-profiling node: each kernel
// alone, caches flushed) both time kernels outside the CUDA graph they run in, so a small
// kernel's cost there includes launch gaps and excludes the PDL overlap it has in the graph
// (session 34: moe_route read 12 us a call in ncu, and a 4x faster top-k moved the decode step by
// nothing). Here CUPTI's activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: the start and
// end of every kernel as it ran, graph nodes included) of a window of graph replays are cut at
// every start and end: each slice of time goes whole to the oldest kernel running in it (exposed:
// the stream's critical path; a programmatic dependent that started early and waits is charged
// from its predecessor's end on), also split evenly among them (split), and slices with none
// running are the window's gaps. Either sums with the gaps to the window, so the table says what
// each kernel costs the step as it runs, overlap and all.
//
// Caveat (session 37, bench/results/session37-2026-12-07 call C): with CUPTI tracing, each
// cudaGraphLaunch of a model's step graph spends ~2.2-2.5 ms on the host (the line printed under
// each table), so the gap before a step's first kernel is the tracer's own; untraced launches of
// 800-1600-node graphs take 9-25 us. Read the rows inside a step; discount that one gap.
//
// CUPTI is loaded with dlopen (libcupti.so.13, then libcupti.so: the device bundle carries the
// toolkit's copy in cudabins/lib), so the benches need no link dependency and run unchanged where
// it is missing (the table is then skipped with a note). Activity recording is switched on at
// kernel_trace_init(), before any graph is instantiated (graph kernel nodes are traced from their
// instantiation on); records outside a window are dropped as they arrive.
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/graph_step.h"
#include "kernel_trace_attribution.h"

namespace ds4::bench {

// DS4_KERNEL_TRACE: unset, empty or 0 = off, else the steps a traced window replays (1..64); any
// other value ends the bench with a message (a typo must not read as "off").
inline int kernel_trace_env() {
  const char* e = std::getenv("DS4_KERNEL_TRACE");
  if (!e || !*e) return 0;
  char* end = nullptr;
  const long n = std::strtol(e, &end, 10);
  if (*end != '\0' || n < 0 || n > 64) {
    std::fprintf(stderr, "DS4_KERNEL_TRACE=%s: expected 0 (off) or the steps to trace, 1..64\n", e);
    std::exit(2);
  }
  return int(n);
}

class KernelTrace {
 public:
  // The process's tracer, or null when DS4_KERNEL_TRACE is unset / 0 or CUPTI is unusable (said
  // once on stderr). The first call switches the activity recording on: make it before any graph.
  static KernelTrace* get() {
    static KernelTrace* t = make();
    return t;
  }

  // Starts a window: everything queued so far has run and its records are dropped.
  void begin() {
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    flush_all_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    {
      const std::lock_guard<std::mutex> lock(mu_);
      recs_.clear();
      collecting_ = true;
    }
    get_timestamp_(&t0_);
    cuda::graph_launch_stats_reset();
  }

  // Ends the window and prints its table: `what` names the window, per_ `units` in it (steps).
  void end(const char* what, int units) {
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    uint64_t t1 = 0;
    get_timestamp_(&t1);
    flush_all_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::vector<kernel_trace_detail::Record> recs;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      collecting_ = false;
      recs.swap(recs_);
    }
    std::vector<kernel_trace_detail::Record> in;
    for (const auto& r : recs)
      if (r.end > t0_ && r.start < t1) in.push_back(r);
    std::unordered_map<const char*, std::string> names;
    auto name_of = [&](const char* n) -> std::string {
      auto it = names.find(n);
      if (it == names.end()) it = names.emplace(n, kernel_trace_detail::short_name(n ? n : "?")).first;
      return it->second;
    };
    print(kernel_trace_detail::attribute(in, t0_, t1, name_of), what, std::max(1, units), in.size(), dropped_);
    const cuda::GraphLaunchStats g = cuda::graph_launch_stats();
    if (g.launches)
      std::printf(
          "host time in cudaGraphLaunch over the window: %lld launches, %.1f us each on average, %.1f us at most\n",
          (long long)g.launches, g.host_us / double(g.launches), g.max_us);
  }

 private:
  using EnableFn = CUptiResult (*)(CUpti_ActivityKind);
  using RegisterFn = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  using FlushFn = CUptiResult (*)(uint32_t);
  using NextFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);
  using StampFn = CUptiResult (*)(uint64_t*);

  static KernelTrace* make() {
    if (kernel_trace_env() == 0) return nullptr;
    void* h = nullptr;
    for (const char* lib : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"})
      if ((h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL))) break;
    auto* t = new KernelTrace();
    if (h) {
      t->enable_ = reinterpret_cast<EnableFn>(dlsym(h, "cuptiActivityEnable"));
      t->register_ = reinterpret_cast<RegisterFn>(dlsym(h, "cuptiActivityRegisterCallbacks"));
      t->flush_all_ = reinterpret_cast<FlushFn>(dlsym(h, "cuptiActivityFlushAll"));
      t->next_ = reinterpret_cast<NextFn>(dlsym(h, "cuptiActivityGetNextRecord"));
      t->get_timestamp_ = reinterpret_cast<StampFn>(dlsym(h, "cuptiGetTimestamp"));
    }
    const bool ok = h && t->enable_ && t->register_ && t->flush_all_ && t->next_ && t->get_timestamp_ &&
                    t->register_(&KernelTrace::buffer_requested, &KernelTrace::buffer_completed) == CUPTI_SUCCESS &&
                    t->enable_(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS &&
                    t->enable_(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS &&
                    t->enable_(CUPTI_ACTIVITY_KIND_MEMSET) == CUPTI_SUCCESS;
    if (!ok) {
      std::fprintf(stderr, "DS4_KERNEL_TRACE: CUPTI unusable (%s): no in-graph kernel tables\n",
                   h ? "activity API refused" : dlerror());
      delete t;
      return nullptr;
    }
    std::fprintf(stderr, "DS4_KERNEL_TRACE: CUPTI kernel activity on\n");
    instance_.store(t);
    return t;
  }

  static constexpr size_t kBufferBytes = size_t(8) << 20;

  static void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = kBufferBytes;
    *max_records = 0;
  }

  static void buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    KernelTrace* t = instance_.load();  // null until make() is done (nothing is collected before a window)
    if (t) {
      const std::lock_guard<std::mutex> lock(t->mu_);
      CUpti_Activity* rec = nullptr;
      while (t->next_(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (!t->collecting_) continue;
        if (t->recs_.size() >= kMaxRecords) {
          ++t->dropped_;
          continue;
        }
        // Copies and fills in a graph are nodes the stream waits on like kernels: rows of their own
        // (else their time would read as gaps).
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
          t->recs_.push_back(
              {k->start, k->end, k->name, k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ});
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
          t->recs_.push_back({m->start, m->end, "[memcpy]", 0, int32_t(std::min<uint64_t>(m->bytes, INT32_MAX))});
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
          t->recs_.push_back({m->start, m->end, "[memset]", 0, int32_t(std::min<uint64_t>(m->bytes, INT32_MAX))});
        }
      }
    }
    std::free(buffer);
  }

  static void print(const kernel_trace_detail::Attribution& a, const char* what, int units, size_t n, int64_t dropped) {
    std::vector<std::pair<double, std::string>> order;
    double durations = 0;
    for (const auto& [name, row] : a.rows) order.push_back({row.exposed_ns, name}), durations += row.duration_ns;
    std::sort(order.rbegin(), order.rend());
    const double per = 1e6 * units;  // ns -> ms per unit
    std::printf(
        "\nin-graph kernel time of %s (CUPTI activity, DS4_KERNEL_TRACE; %zu kernels, window %.3f ms = "
        "%.3f ms per step over %d; kernel durations sum to %.3f ms per step: %.2fx the window, the overlap)"
        "%s\n",
        what, n, a.window_ns / 1e6, a.window_ns / per, units, durations / per,
        a.window_ns > 0 ? durations / a.window_ns : 0.0, dropped ? " (records dropped: table partial)" : "");
    std::printf(
        "| kernel | launches/step | exposed ms/step (oldest running) | share | split ms/step (evenly) | alone ms/step "
        "| gap before ms/step | mean us (start-end) | grid x block (copies: bytes) |\n"
        "|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& [ns, name] : order) {
      const auto& r = a.rows.at(name);
      std::printf("| %s | %.1f | %.4f | %.1f%% | %.4f | %.4f | %.4f | %.2f | %lld x %lld |\n", name.c_str(),
                  double(r.launches) / units, ns / per, a.window_ns > 0 ? 100 * ns / a.window_ns : 0.0,
                  r.attributed_ns / per, r.alone_ns / per, r.gap_before_ns / per,
                  r.launches ? r.duration_ns / r.launches / 1e3 : 0.0, (long long)r.grid, (long long)r.block);
    }
    std::printf("| (no kernel running) | | %.4f | %.1f%% | | | | | |\n", a.gap_ns / per,
                a.window_ns > 0 ? 100 * a.gap_ns / a.window_ns : 0.0);
    std::fflush(stdout);
  }

  static constexpr size_t kMaxRecords = size_t(1) << 22;
  static inline std::atomic<KernelTrace*> instance_{nullptr};

  EnableFn enable_ = nullptr;
  RegisterFn register_ = nullptr;
  FlushFn flush_all_ = nullptr;
  NextFn next_ = nullptr;
  StampFn get_timestamp_ = nullptr;
  std::mutex mu_;
  std::vector<kernel_trace_detail::Record> recs_;
  bool collecting_ = false;
  int64_t dropped_ = 0;
  uint64_t t0_ = 0;
};

// Switches the recording on if DS4_KERNEL_TRACE asks (call first thing in main, before any graph).
inline void kernel_trace_init() { (void)KernelTrace::get(); }

// Steps a traced window replays: DS4_KERNEL_TRACE=N.
inline int kernel_trace_steps() { return std::max(1, kernel_trace_env()); }

// A traced window (no-op without DS4_KERNEL_TRACE): its destructor prints the table.
class TraceWindow {
 public:
  TraceWindow(std::string what, int units) : t_(KernelTrace::get()), what_(std::move(what)), units_(units) {
    if (t_) t_->begin();
  }
  ~TraceWindow() {
    if (t_) t_->end(what_.c_str(), units_);
  }
  TraceWindow(const TraceWindow&) = delete;
  TraceWindow& operator=(const TraceWindow&) = delete;

 private:
  KernelTrace* t_;
  std::string what_;
  int units_;
};

}  // namespace ds4::bench
