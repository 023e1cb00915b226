// bench/kernel_trace_attribution.h: the in-graph kernel table's slicing of a trace window
// (DS4_KERNEL_TRACE, bench/cuda_kernel_trace.h), on hand-made records.
#include <gtest/gtest.h>

#include "../../../bench/kernel_trace_attribution.h"

namespace {

using ds4::bench::kernel_trace_detail::attribute;
using ds4::bench::kernel_trace_detail::Attribution;
using ds4::bench::kernel_trace_detail::Record;
using ds4::bench::kernel_trace_detail::short_name;

Attribution run(const std::vector<Record>& recs, uint64_t t0, uint64_t t1) {
  return attribute(recs, t0, t1, [](const char* n) { return std::string(n); });
}

TEST(KernelTraceAttribution, SerialKernelsAndGaps) {
  const auto a = run({{100, 110, "A", 1, 32}, {112, 120, "B", 2, 64}}, 100, 125);
  EXPECT_DOUBLE_EQ(a.window_ns, 25);
  EXPECT_DOUBLE_EQ(a.rows.at("A").attributed_ns, 10);
  EXPECT_DOUBLE_EQ(a.rows.at("B").attributed_ns, 8);
  EXPECT_DOUBLE_EQ(a.rows.at("A").alone_ns, 10);
  EXPECT_DOUBLE_EQ(a.gap_ns, 7);                      // 110..112 and 120..125
  EXPECT_DOUBLE_EQ(a.rows.at("B").gap_before_ns, 2);  // the gap before B; the window's tail has no kernel after it
  EXPECT_DOUBLE_EQ(a.rows.at("A").gap_before_ns, 0);
  EXPECT_EQ(a.rows.at("B").grid, 2);
  EXPECT_EQ(a.rows.at("B").block, 64);
}

TEST(KernelTraceAttribution, OverlapIsSplitEvenly) {
  // B starts early (a programmatic dependent) while A finishes: 4 ns shared.
  const auto a = run({{0, 10, "A", 1, 1}, {6, 14, "B", 1, 1}}, 0, 14);
  EXPECT_DOUBLE_EQ(a.rows.at("A").attributed_ns, 8);
  EXPECT_DOUBLE_EQ(a.rows.at("B").attributed_ns, 6);
  EXPECT_DOUBLE_EQ(a.rows.at("A").alone_ns, 6);
  EXPECT_DOUBLE_EQ(a.rows.at("B").alone_ns, 4);
  EXPECT_DOUBLE_EQ(a.rows.at("A").duration_ns, 10);
  EXPECT_DOUBLE_EQ(a.gap_ns, 0);
}

TEST(KernelTraceAttribution, SumsToTheWindowAndClipsAtItsEdges) {
  // C began before the window, D ends after it; three kernels overlap in 20..30; E repeats.
  const std::vector<Record> recs = {
      {90, 110, "C", 1, 1}, {105, 130, "E", 1, 1}, {120, 140, "D", 1, 1}, {125, 128, "E", 1, 1}, {150, 170, "E", 1, 1}};
  const auto a = run(recs, 100, 160);
  double sum = a.gap_ns;
  for (const auto& [name, row] : a.rows) sum += row.attributed_ns;
  EXPECT_DOUBLE_EQ(sum, 60);
  EXPECT_DOUBLE_EQ(a.rows.at("C").attributed_ns, 5 + 5.0 / 2);  // 100..105 alone, 105..110 with E
  EXPECT_DOUBLE_EQ(a.rows.at("C").duration_ns, 20);             // its whole run, not the clipped part
  EXPECT_EQ(a.rows.at("E").launches, 3);
  // E: 105..110 half, 110..120 alone, 120..125 half (D), 125..128 a third of D, E, E twice, 128..130 half,
  // 150..160 alone.
  EXPECT_DOUBLE_EQ(a.rows.at("E").attributed_ns, 2.5 + 10 + 2.5 + 2 + 1 + 10);
  EXPECT_DOUBLE_EQ(a.rows.at("D").attributed_ns, 2.5 + 1 + 1 + 10);  // 130..140 alone
  EXPECT_DOUBLE_EQ(a.gap_ns, 10);                                    // 140..150
  EXPECT_DOUBLE_EQ(a.rows.at("E").gap_before_ns, 10);                // E's third launch at 150
}

TEST(KernelTraceAttribution, TouchingKernelsDoNotOverlap) {
  const auto a = run({{0, 5, "A", 1, 1}, {5, 9, "B", 1, 1}}, 0, 9);
  EXPECT_DOUBLE_EQ(a.rows.at("A").alone_ns, 5);
  EXPECT_DOUBLE_EQ(a.rows.at("B").alone_ns, 4);
}

TEST(KernelTraceAttribution, ShortNames) {
  EXPECT_EQ(short_name("_ZN3ds44cuda6kernelILi4EEEvPf"), "kernel<4>");
  EXPECT_EQ(short_name("_ZN3ds49qwen_next4cuda12_GLOBAL__N_114hc_down_kernelIiLi2EEEvPf"),
            "qwen_next::cuda::hc_down_kernel<int, 2>");
  EXPECT_EQ(short_name("not_mangled"), "not_mangled");
}

}  // namespace
