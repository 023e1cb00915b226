// One speculative cycle against the MTPLX acceptance vectors (tests/data/speculative, a NumPy
// port of mtplx/generation.py generate_mtpk made by tools/reference/speculative): given the
// draft and target logits of a case, the engine's cycle must draw the same drafts, take the
// same accept/reject decisions, draw the same correction or bonus, and leave the PCG64
// stream at the same point (the next double), draw for draw.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/speculative.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::engine {
namespace {

using nlohmann::json;

std::vector<float> row_of(const json& r) {
  std::vector<float> v;
  for (const auto& x : r) v.push_back(x.is_null() ? -std::numeric_limits<float>::infinity() : x.get<float>());
  return v;
}

struct S : ModelState {
  int64_t pos = 0;
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<S>(*this); }
  int64_t position() const override { return pos; }
  size_t bytes() const override { return 0; }
};

// A model whose verify rows and draft rows are the case's logits, whatever the tokens.
class Replay : public Model, public DraftHead {
 public:
  Replay(std::vector<std::vector<float>> draft, std::vector<std::vector<float>> target)
      : draft_(std::move(draft)), target_(std::move(target)) {
    info_.family = "test_replay";
    info_.vocab_size = int64_t(target_[0].size());
    info_.max_context = 1 << 20;
  }
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<ModelState> new_state() const override { return std::make_unique<S>(); }
  void forward(ModelState& st, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override {
    dynamic_cast<S&>(st).pos += int64_t(tokens.size());
    logits.clear();
    if (mode != Logits::kAll) return;
    EXPECT_EQ(tokens.size(), target_.size());
    for (size_t i = 0; i < tokens.size(); ++i) logits.insert(logits.end(), target_[i].begin(), target_[i].end());
  }
  DraftHead* draft_head() override { return this; }
  void enable_draft(ModelState&) const override {}
  void draft(ModelState& s, int32_t next, int depth, std::vector<int32_t>& drafts) override {
    draft_picked(s, next, depth, Pick{}, drafts);
  }
  bool draft_picked(ModelState&, int32_t, int depth, const Pick& pick, std::vector<int32_t>& drafts) override {
    drafts.clear();
    for (int k = 0; k < depth; ++k) {
      const auto& r = draft_[size_t(k)];
      drafts.push_back(pick ? pick(r) : argmax(r.data(), int64_t(r.size())));
    }
    return true;
  }

 private:
  std::vector<std::vector<float>> draft_, target_;
  ModelInfo info_;
};

json load() {
  std::ifstream f(std::string(DS4_TEST_DATA) + "/speculative/mtplx_accept_vectors.json");
  EXPECT_TRUE(f.good());
  return json::parse(f);
}

TEST(MtplxAcceptVectors, EveryCaseDrawForDraw) {
  const json doc = load();
  ASSERT_GE(doc["cases"].size(), 10u);
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    std::vector<std::vector<float>> draft, target;
    for (const auto& r : c["draft_logits"]) draft.push_back(row_of(r));
    for (const auto& r : c["target_logits"]) target.push_back(row_of(r));
    Replay m(draft, target);
    SpecConfig cfg;
    cfg.depth = c["depth"].get<int>();
    cfg.sampler.temperature = c["temperature"].get<double>();
    cfg.sampler.top_p = c["top_p"].get<double>() >= 1 ? 1.0 : c["top_p"].get<double>();
    cfg.sampler.top_k = c["top_k"].get<int>();
    cfg.sampler.seed = std::stoull(c["seed"].get<std::string>());
    if (c.contains("draft_temperature")) cfg.draft_temperature = c["draft_temperature"].get<double>();
    const bool greedy = cfg.sampler.temperature <= 0;
    cfg.category = greedy ? SpecCategory::kGreedy : SpecCategory::kExact;
    std::vector<int32_t> stops;
    if (c.contains("stop_ids"))
      for (const auto& s : c["stop_ids"]) stops.push_back(s.get<int32_t>());
    Pcg64 rng(cfg.sampler.seed);  // the primary is known: the cycle starts the stream
    SpecDecoder spec(m, cfg, greedy ? nullptr : &rng);
    auto st = m.new_state();
    SpecCycle out;
    // Budget past the depth: the bonus row is always reachable, as in the vectors.
    spec.cycle(st, 0, cfg.depth + 1, stops, out);

    const json& e = c["expected"];
    std::vector<int32_t> accepted(out.accepted.begin(), out.accepted.end());
    EXPECT_EQ(int64_t(accepted.size()), e["accepted"].get<int64_t>());
    const auto drafts = e["drafts"].get<std::vector<int32_t>>();
    EXPECT_EQ(std::vector<int32_t>(drafts.begin(), drafts.begin() + int64_t(accepted.size())), accepted);
    const bool stopped = !accepted.empty() && std::find(stops.begin(), stops.end(), accepted.back()) != stops.end();
    const int32_t correction = e["correction"].is_null() ? -1 : e["correction"].get<int32_t>();
    const int32_t bonus = e["bonus"].is_null() ? -1 : e["bonus"].get<int32_t>();
    if (stopped) {
      EXPECT_EQ(out.bonus, -1);
      EXPECT_EQ(correction, -1);
      EXPECT_EQ(bonus, -1);
    } else {
      EXPECT_EQ(out.bonus, correction >= 0 ? correction : bonus);
    }
    std::vector<int32_t> emitted = accepted;
    if (out.bonus >= 0) emitted.push_back(out.bonus);
    EXPECT_EQ(emitted, e["emitted"].get<std::vector<int32_t>>());
    EXPECT_EQ(spec.stats().accepted, int64_t(accepted.size()));
    EXPECT_EQ(spec.stats().corrections, correction >= 0 ? 1 : 0);
    EXPECT_EQ(spec.stats().bonus, bonus >= 0 ? 1 : 0);
    // Same number of draws in the same stream: the next double matches bit for bit.
    if (!greedy) {
      EXPECT_EQ(rng.next_double(), e["next_double"].get<double>());
    }
  }
}

TEST(MtplxAcceptVectors, DraftAndTargetRowsMatch) {
  // Row 0 of the filtered draft and target distributions, within the file's 1e-12.
  const json doc = load();
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    if (c["temperature"].get<double>() <= 0 || c["expected"]["target_p0"].is_null()) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    SamplerParams p;
    p.temperature = c["temperature"].get<double>();
    p.top_p = c["top_p"].get<double>() >= 1 ? 1.0 : c["top_p"].get<double>();
    p.top_k = c["top_k"].get<int>();
    const auto t0 = row_of(c["target_logits"][0]);
    std::vector<double> dense(t0.size());
    mtplx_distribution(t0, p, dense);
    const auto& sp = c["expected"]["target_p0"];
    std::vector<double> want(t0.size(), 0.0);
    for (size_t i = 0; i < sp["ids"].size(); ++i) want[sp["ids"][i].get<size_t>()] = sp["p"][i].get<double>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(dense[i], want[i], 1e-12) << "id " << i;
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

}  // namespace
}  // namespace ds4::engine
