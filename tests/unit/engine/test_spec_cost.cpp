// The speculation cost model (engine/spec_cost.h): expected tokens per cycle, the decision
// and its break-even acceptance on CPU-like and GPU-like costs, the margin, the prior and
// its replacement by live acceptance.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/spec_cost.h"

using namespace ds4::engine;

namespace {
SpecCostInputs costs(double decode_ms, double verify_ms, double draft_ms, double acceptance, int depth = 3) {
  SpecCostInputs in;
  in.depth = depth;
  in.decode_s = decode_ms / 1e3;
  in.verify_s = verify_ms / 1e3;
  in.draft_s = draft_ms / 1e3;
  in.acceptance = acceptance;
  return in;
}
}  // namespace

TEST(SpecCost, TokensPerCycle) {
  EXPECT_DOUBLE_EQ(spec_tokens_per_cycle(0.0, 3), 1.0);    // only the correction
  EXPECT_DOUBLE_EQ(spec_tokens_per_cycle(1.0, 3), 4.0);    // every draft + the bonus
  EXPECT_DOUBLE_EQ(spec_tokens_per_cycle(0.5, 3), 1.875);  // 1 + .5 + .25 + .125
  EXPECT_DOUBLE_EQ(spec_tokens_per_cycle(0.5, 1), 1.5);
  EXPECT_DOUBLE_EQ(spec_tokens_per_cycle(1.5, 2), 3.0);    // clamped to 1
}

TEST(SpecCost, VerifyAsDearAsItsRowsNeverPays) {
  // A compute-bound CPU: 4 verify rows cost 3.9 decode steps, plus the draft.
  const auto d = decide_speculation(costs(1.0, 3.9, 0.3, 0.8));
  EXPECT_FALSE(d.enabled);
  EXPECT_NEAR(d.tokens_per_cycle, 2.952, 1e-12);
  EXPECT_NEAR(d.cycle_s, 4.2e-3, 1e-12);
  EXPECT_NEAR(d.speedup, 2.952 / 4.2, 1e-9);
  EXPECT_NEAR(d.break_even_acceptance, 4.2 / 4.0, 1e-9);  // > 1: no acceptance pays
  EXPECT_EQ(d.reason.rfind("off: expected 0.70x AR", 0), 0u) << d.reason;
}

TEST(SpecCost, MemoryBoundVerifyPays) {
  // A memory-bound GPU: 4 rows cost about one step.
  const auto d = decide_speculation(costs(10.0, 11.0, 2.0, 0.7));
  EXPECT_TRUE(d.enabled);
  EXPECT_NEAR(d.tokens_per_cycle, 2.533, 1e-12);
  EXPECT_NEAR(d.speedup, 2.533 / 1.3, 1e-9);
  EXPECT_NEAR(spec_tokens_per_cycle(d.break_even_acceptance, 3), 1.3, 1e-9);
  EXPECT_GT(d.break_even_acceptance, 0.23);
  EXPECT_LT(d.break_even_acceptance, 0.24);
}

TEST(SpecCost, MarginKeepsATieOff) {
  // 1.02x expected: inside the margin, off; the same with margin 1 is on.
  const auto in = costs(10.0, 10.0 * 1.875 / 1.02 - 1.0, 1.0, 0.5);
  EXPECT_NEAR(decide_speculation(in).speedup, 1.02, 1e-9);
  EXPECT_FALSE(decide_speculation(in).enabled);
  EXPECT_TRUE(decide_speculation(in, 1.0).enabled);
}

TEST(SpecCost, NotMeasuredIsOff) {
  const auto d = decide_speculation(SpecCostInputs{});
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.speedup, 0.0);
  EXPECT_EQ(d.reason, "not measured (no draft head, or speculation off)");
}

TEST(SpecCost, LiveAcceptanceReplacesThePrior) {
  SpecCostModel m;
  EXPECT_FALSE(m.measured());
  m.set_warmup(3, 10e-3, 14e-3, 3e-3);
  EXPECT_TRUE(m.measured());
  EXPECT_EQ(m.inputs().acceptance, SpecCostModel::kPriorAcceptance);
  EXPECT_EQ(m.inputs().source, "warmup");
  EXPECT_TRUE(m.decision().enabled);  // 2.533 tokens for 1.7 steps at the prior
  // 10 cycles, 3 of 30 drafts accepted: the pooled acceptance shrunk toward the prior.
  m.observe(10, 30, 3, 10 * 3e-3, 10 * 14e-3, 0.0);
  EXPECT_NEAR(m.inputs().acceptance, (3 + 0.7 * 32) / (30 + 32.0), 1e-12);
  EXPECT_EQ(m.inputs().observed_drafted, 30);
  EXPECT_EQ(m.inputs().source, "warmup+live");
  // Many more rejections: speculation no longer pays.
  m.observe(1000, 3000, 300, 1000 * 3e-3, 1000 * 14e-3, 0.0);
  EXPECT_NEAR(m.inputs().acceptance, (303 + 0.7 * 32) / (3030 + 32.0), 1e-12);
  EXPECT_FALSE(m.decision().enabled);
}

TEST(SpecCost, LiveCyclesMoveTheCosts) {
  SpecCostModel m;
  m.set_warmup(3, 10e-3, 14e-3, 3e-3);
  // 16 cycles at 20 ms verify each: a quarter of the way from 14 to 20 ms.
  m.observe(16, 48, 40, 16 * 3e-3, 16 * 20e-3, 16 * 1e-3);
  EXPECT_NEAR(m.inputs().verify_s, 14e-3 + 0.25 * 6e-3, 1e-15);
  EXPECT_NEAR(m.inputs().draft_s, 3e-3, 1e-15);
  EXPECT_NEAR(m.inputs().commit_s, 0.25 * 1e-3, 1e-15);
  m.observe(0, 0, 0, 1.0, 1.0, 1.0);  // a turn with no cycle changes nothing
  EXPECT_NEAR(m.inputs().verify_s, 15.5e-3, 1e-15);
}

TEST(SpecCost, LiveDecodeStepsMoveTheStepCost) {
  SpecCostModel m;
  m.observe_decode(5e-3);  // before the warmup: nothing to move
  EXPECT_EQ(m.inputs().decode_s, 0.0);
  m.set_warmup(3, 1e-3, 3.1e-3, 3.9e-3);
  // The warmup's step understates a chat's (context, the draw): off at acceptance 0.7...
  EXPECT_FALSE(m.decision().enabled);
  for (int i = 0; i < 256; ++i) m.observe_decode(4e-3);
  // ...the live steps (4 ms) move decode_s most of the way: 1 + 3 * (1 - (63/64)^256).
  EXPECT_NEAR(m.inputs().decode_s, 1e-3 + 3e-3 * (1 - std::pow(63.0 / 64.0, 256)), 1e-12);
  EXPECT_EQ(m.inputs().source, "warmup+live");
  EXPECT_TRUE(m.decision().enabled);  // 2.533 tokens per 7 ms cycle vs ~3.9 ms per AR token
}

TEST(RowCostCurve, InterpolatesBetweenBucketsAndExtrapolatesAlongTheLastSlope) {
  RowCostCurve c;
  EXPECT_FALSE(c.seconds(4).has_value());
  c.observe(1, 0.010);
  EXPECT_DOUBLE_EQ(*c.seconds(1), 0.010);
  EXPECT_DOUBLE_EQ(*c.seconds(8), 0.010);  // one point: held (no slope yet)
  c.observe(4, 0.012);
  EXPECT_NEAR(*c.seconds(2), 0.010 + 0.002 / 3, 1e-15);  // between (1, 10 ms) and (4, 12 ms)
  EXPECT_NEAR(*c.seconds(16), 0.012 + (0.002 / 3) * 12, 1e-15);  // past the last: its slope
  c.observe(5, 0.014);  // same bucket as 4 (4..7): the plain mean of the two (4.5 rows, 13 ms)
  EXPECT_NEAR(*c.seconds(9), 0.013 + (0.003 / 3.5) * 4.5, 1e-15);
  EXPECT_EQ(c.points(), 2);
  // Below every point: proportional to the rows.
  RowCostCurve d;
  d.observe(8, 0.008);
  EXPECT_DOUBLE_EQ(*d.seconds(2), 0.002);
  // A noisy decrease never makes more rows cheaper than the last point.
  d.observe(16, 0.007);
  EXPECT_DOUBLE_EQ(*d.seconds(64), 0.007);
  // Nonsense observations are ignored.
  d.observe(0, 1.0);
  d.observe(4, -1.0);
  d.observe(4, std::nan(""));
  EXPECT_EQ(d.points(), 2);
}

TEST(RowCostCurve, LaterObservationsMoveAPointByASixteenth) {
  RowCostCurve c;
  for (int i = 0; i < 16; ++i) c.observe(1, 0.010);
  c.observe(1, 0.026);
  EXPECT_NEAR(*c.seconds(1), 0.011, 1e-15);
}

TEST(SpecCost, UnderLoadTheBatchedForwardsDecide) {
  // A GPU: 1 row 10 ms, 4 rows 11 ms (memory bound), then compute bound: 16 rows 16 ms,
  // 64 rows 64 ms. One stream: verify nearly free, on. 16 streams: AR costs 1 ms per token and
  // stream, a cycle 64 / 16 = 4 ms + the 2 ms draft for 2.53 tokens: off.
  const SpecCostInputs in = costs(10.0, 11.0, 2.0, 0.7);
  RowCostCurve c;
  c.observe(1, 0.010);
  c.observe(4, 0.011);
  c.observe(16, 0.016);
  c.observe(64, 0.064);
  const SpecCostDecision one = decide_speculation_at(in, c, 1);
  EXPECT_TRUE(one.enabled);
  EXPECT_NEAR(one.speedup, decide_speculation(in).speedup, 1e-12);  // one stream: the inputs alone
  const SpecCostDecision four = decide_speculation_at(in, c, 4);  // AR 11 / 4, cycle 2 + 16 / 4 ms
  EXPECT_TRUE(four.enabled);
  EXPECT_NEAR(four.speedup, 2.533 * (0.011 / 4) / (0.002 + 0.016 / 4), 1e-9);
  const SpecCostDecision sixteen = decide_speculation_at(in, c, 16);
  EXPECT_FALSE(sixteen.enabled);
  EXPECT_NEAR(sixteen.speedup, 2.533 * (0.016 / 16) / (0.002 + 0.064 / 16), 1e-9);
  EXPECT_NE(sixteen.reason.find("at 16 streams"), std::string::npos) << sixteen.reason;
  // Nothing observed: the single-stream inputs decide.
  EXPECT_TRUE(decide_speculation_at(in, RowCostCurve{}, 16).enabled);
}

TEST(SpecCost, VerifiesOneByOneAgainstBatchedSteps) {
  // A model that batches AR steps but not verifies (the CUDA models today): 16 streams' AR
  // costs 16 / 16 = 1 ms per token and stream; each cycle still costs its own 11 ms verify.
  const SpecCostInputs in = costs(10.0, 11.0, 2.0, 0.7);
  RowCostCurve c;
  c.observe(1, 0.010);
  c.observe(4, 0.011);
  c.observe(16, 0.016);
  const SpecCostDecision d = decide_speculation_at(in, c, 16, BatchedForwards{true, false});
  EXPECT_FALSE(d.enabled);
  EXPECT_NEAR(d.speedup, 2.533 * 0.001 / 0.013, 1e-9);
  EXPECT_NE(d.reason.find("verifies one by one"), std::string::npos) << d.reason;
  // Nothing batched: 16 streams cost what one does, per stream.
  EXPECT_NEAR(decide_speculation_at(in, c, 16, BatchedForwards{false, false}).speedup,
              decide_speculation(in).speedup, 1e-12);
  // Batched verifies, one-by-one AR steps: AR 10 ms per stream, cycle 2 + 64-row extrapolation / 16.
  const double t64 = 0.016 + (0.005 / 12) * 48;
  EXPECT_NEAR(decide_speculation_at(in, c, 16, BatchedForwards{false, true}).speedup,
              2.533 * 0.010 / (0.002 + t64 / 16), 1e-9);
}

TEST(SpecCost, ModelWarmupSeedsTheCurve) {
  SpecCostModel m;
  m.set_warmup(3, 0.010, 0.011, 0.002);
  // Only the warmup's 1 and 4 rows: 8 streams read 8 and 32 rows along their slope.
  const double t8 = 0.011 + (0.001 / 3) * 4, t32 = 0.011 + (0.001 / 3) * 28;
  const SpecCostDecision d = m.decision_at(8);
  EXPECT_NEAR(d.speedup, spec_tokens_per_cycle(0.7, 3) * (t8 / 8) / (0.002 + t32 / 8), 1e-9);
  m.observe_rows(32, 0.5);  // a slow batched verify: 32 rows dear
  EXPECT_FALSE(m.decision_at(8).enabled);
  EXPECT_TRUE(m.decision_at(1).enabled);
}
