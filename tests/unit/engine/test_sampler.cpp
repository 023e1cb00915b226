// Sampler draws against tests/data/sampler/*.json, made by real NumPy
// (tools/reference/sampler/gen_sampler_vectors.py). Token ids must match exactly; so must
// the ds4 RNG state after every draw and the raw PCG64 / SeedSequence words.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/sampler.h"

using namespace ds4::engine;
using nlohmann::json;

namespace {
json load(const std::string& name) {
  std::ifstream f(std::string(DS4_TEST_DATA) + "/sampler/" + name);
  EXPECT_TRUE(f.good()) << name;
  return json::parse(f);
}

std::vector<uint32_t> seed_from_string(const std::string& s) {
  unsigned __int128 v = 0;
  for (char c : s) v = v * 10 + unsigned(c - '0');
  return seed_words(uint64_t(v), uint64_t(v >> 64));
}

std::vector<float> row(const json& j) {
  std::vector<float> r;
  for (const auto& x : j) r.push_back(x.is_null() ? -INFINITY : float(x.get<double>()));
  return r;
}
}  // namespace

TEST(Rng, SeedSequenceAndPcg64MatchNumpy) {
  auto data = load("pcg64_vectors.json");
  ASSERT_GE(data["cases"].size(), 5u);
  for (const auto& c : data["cases"]) {
    auto words = seed_from_string(c["seed"]);
    SeedSequence ss(words);
    auto st = ss.generate_state_u32(8);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(st[i], c["seedseq_state_u32"][i].get<uint32_t>()) << c["seed"];
    Pcg64 raw(ss);
    for (const auto& r : c["raw_u64"]) EXPECT_EQ(raw.next_u64(), std::stoull(r.get<std::string>())) << c["seed"];
    Pcg64 dbl(SeedSequence{words});
    for (const auto& d : c["doubles"]) EXPECT_EQ(dbl.next_double(), d.get<double>()) << c["seed"];
  }
}

TEST(Sampler, MtplxDrawForDraw) {
  auto data = load("qwen_vectors.json");
  size_t draws = 0;
  for (const auto& c : data["cases"]) {
    SamplerParams p;
    p.temperature = c["temperature"].get<double>();
    p.top_p = c["top_p"].get<double>();
    p.top_k = c["top_k"].get<int>();
    Sampler s(SamplerKind::kMtplx, p, seed_from_string(c["seed"]));
    const auto& rows = c["logits"];
    for (size_t i = 0; i < rows.size(); ++i, ++draws) {
      auto r = row(rows[i]);
      if (i == 0 && c.contains("first_probs")) {
        std::vector<double> probs(r.size());
        mtplx_distribution(r, p, probs);
        const auto& fp = c["first_probs"];
        size_t nz = 0;
        for (double x : probs) nz += x > 0;
        EXPECT_EQ(nz, fp["ids"].size()) << c["name"];
        for (size_t k = 0; k < fp["ids"].size(); ++k)
          EXPECT_NEAR(probs[fp["ids"][k].get<int>()], fp["p"][k].get<double>(), 1e-12) << c["name"];
      }
      EXPECT_EQ(s.sample(r), c["ids"][i].get<int>()) << c["name"] << " step " << i;
    }
  }
  EXPECT_GE(draws, 100u);
}

TEST(Sampler, Ds4DrawForDrawWithRngState) {
  auto data = load("ds4_vectors.json");
  for (const auto& c : data["cases"]) {
    SamplerParams p;
    p.temperature = c["temperature"].get<double>();
    p.top_p = c["top_p"].get<double>();
    p.top_k = c["top_k"].get<int>();
    p.min_p = c["min_p"].get<double>();
    Ds4Rng rng(std::stoull(c["seed"].get<std::string>()));
    const auto& rows = c["logits"];
    for (size_t i = 0; i < rows.size(); ++i) {
      auto r = row(rows[i]);
      EXPECT_EQ(ds4_sample(r, p, rng), c["ids"][i].get<int>()) << c["name"] << " step " << i;
      EXPECT_EQ(rng.state(), std::stoull(c["rng_states"][i].get<std::string>())) << c["name"] << " step " << i;
    }
  }
}

TEST(Sampler, MtplxRejectsMinP) {
  SamplerParams p = default_sampler_params(SamplerKind::kMtplx);
  EXPECT_NO_THROW(validate_sampler_params(SamplerKind::kMtplx, p));
  p.min_p = 0.05;
  try {
    validate_sampler_params(SamplerKind::kMtplx, p);
    FAIL() << "expected InputError";
  } catch (const ds4::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("min_p"), std::string::npos);
  }
  EXPECT_NO_THROW(validate_sampler_params(SamplerKind::kDs4, p));
}

// A subnormal temperature once passed validation and failed mid-turn (every scaled row
// overflowed): refused up front, as is one past the settings' bound; 0 and 1e-6 are fine.
TEST(Sampler, TemperatureIsZeroOrWithinItsRange) {
  for (SamplerKind kind : {SamplerKind::kMtplx, SamplerKind::kDs4}) {
    SamplerParams p = default_sampler_params(kind);
    for (double t : {0.0, 1e-6, 0.7, 100.0}) {
      p.temperature = t;
      EXPECT_NO_THROW(validate_sampler_params(kind, p)) << t;
    }
    for (double t : {1e-320, 5e-324, 1e-7, 100.5, 1e308}) {
      p.temperature = t;
      EXPECT_THROW(validate_sampler_params(kind, p), ds4::InputError) << t;
    }
  }
}

TEST(Sampler, Defaults) {
  auto q = default_sampler_params(SamplerKind::kMtplx);
  EXPECT_EQ(q.temperature, 1.0);
  EXPECT_EQ(q.top_p, 0.95);
  EXPECT_EQ(q.top_k, 20);
  EXPECT_EQ(q.seed, 12345u);
  auto d = default_sampler_params(SamplerKind::kDs4);
  EXPECT_EQ(d.min_p, 0.05);
  EXPECT_EQ(d.top_k, 0);
}
