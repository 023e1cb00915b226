#pragma once
// The arithmetic of cuda_kernel_trace.h's in-graph table, apart from CUPTI so a host test can
// feed it records (tests/bench/test_kernel_trace_attribution.cpp): a window [t0, t1] of kernel
// start / end times is cut at every start and end; each slice goes to the kernels running in it,
// split evenly (attributed_ns; alone_ns: the slices a kernel ran by itself) or whole to the oldest
// kernel running (exposed_ns: what the stream's critical path spent in it), and slices with none running are
// gaps, each also charged to the kernel whose start ended it (gap_before_ns: the launch latency a
// kernel did not hide). Attributed times plus gaps sum to the window.
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ds4::bench {

namespace kernel_trace_detail {

struct Record {
  uint64_t start, end;
  const char* name;  // CUPTI's string (interned for the process); named at report time
  int32_t grid, block;
};

// The slices of [t0, t1] given to each kernel name: attributed ns, launches, summed durations,
// ns when it ran alone, plus the gaps (no kernel running). Pure: the unit test feeds it records.
struct Attribution {
  struct Row {
    double attributed_ns = 0, duration_ns = 0, alone_ns = 0;
    double exposed_ns = 0;     // the slices where it was the oldest kernel running (critical path: a
                               // programmatic dependent that started early and waits is charged from
                               // its predecessor's end on, not for the overlap)
    double gap_before_ns = 0;  // the gaps that ended with this kernel's start (what its launches waited)
    int64_t launches = 0;
    int64_t grid = 0, block = 0;  // of the last launch
  };
  std::map<std::string, Row> rows;
  double gap_ns = 0, window_ns = 0;
};

inline std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // "void ds4::ns::kernel<...>(args)" -> "ns::kernel<...>": drop the return type, our namespaces
  // (the anonymous one first: its parentheses are not the parameters) and the parameters.
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  for (const char* ns : {"(anonymous namespace)::", "ds4::cuda::", "ds4::"})
    for (size_t p; (p = s.find(ns)) != std::string::npos;) s.erase(p, std::strlen(ns));
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<')
      ++depth;
    else if (s[i] == '>')
      --depth;
    else if (s[i] == '(' && depth == 0) {
      s.resize(i);
      break;
    }
  }
  return s;
}

inline Attribution attribute(const std::vector<Record>& recs, uint64_t t0, uint64_t t1,
                             const std::function<std::string(const char*)>& name_of) {
  Attribution a;
  a.window_ns = double(t1 - t0);
  struct Edge {
    uint64_t t;
    int kind;  // 0 end, 1 start (ends first at a tie: a kernel ending as the next starts is no overlap)
    size_t i;
  };
  std::vector<Edge> edges;
  std::vector<std::string> names(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    const uint64_t s = std::max(recs[i].start, t0), e = std::min(recs[i].end, t1);
    names[i] = name_of(recs[i].name);
    auto& row = a.rows[names[i]];
    ++row.launches;
    row.duration_ns += double(recs[i].end - recs[i].start);
    row.grid = recs[i].grid, row.block = recs[i].block;
    if (e <= s) continue;
    edges.push_back({s, 1, i});
    edges.push_back({e, 0, i});
  }
  std::sort(edges.begin(), edges.end(),
            [](const Edge& x, const Edge& y) { return x.t != y.t ? x.t < y.t : x.kind < y.kind; });
  std::vector<size_t> running;
  uint64_t prev = t0;
  for (const Edge& ed : edges) {
    const double dt = double(ed.t - prev);
    if (dt > 0) {
      if (running.empty()) {
        a.gap_ns += dt;
        if (ed.kind == 1) a.rows[names[ed.i]].gap_before_ns += dt;
      }
      size_t oldest = running.empty() ? 0 : running.front();
      for (size_t i : running) {
        auto& row = a.rows[names[i]];
        row.attributed_ns += dt / double(running.size());
        if (running.size() == 1) row.alone_ns += dt;
        if (recs[i].start < recs[oldest].start || (recs[i].start == recs[oldest].start && i < oldest)) oldest = i;
      }
      if (!running.empty()) a.rows[names[oldest]].exposed_ns += dt;
    }
    prev = ed.t;
    if (ed.kind == 1)
      running.push_back(ed.i);
    else
      running.erase(std::find(running.begin(), running.end(), ed.i));
  }
  if (t1 > prev) a.gap_ns += double(t1 - prev);
  return a;
}

}  // namespace kernel_trace_detail

}  // namespace ds4::bench
