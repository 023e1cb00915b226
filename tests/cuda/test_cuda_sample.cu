// GPU sampling candidates (backend/cuda/sample_reduce.h) against the host reference
// (models/sample_candidates.h top_candidates): argmax, finite count, candidate ids and the
// bits of their logits must be identical, on random rows with ties, -0/+0, NaN, +-inf, rows
// with fewer finite values than k, at the vocabulary sizes of the three families (151936
// Qwen, 129280 DeepSeek V4, 154880 GLM). Then end to end: both samplers' draws from the GPU
// candidates (Sampler::sample_from) equal their draws from the full row. Plain executable:
// one "ok  "/"FAIL" line per check, exit 1 on any failure. `--small`: small rows only (for
// compute-sanitizer).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/sample_reduce.h"
#include "engine/sampler.h"
#include "models/sample_candidates.h"

using namespace ds4;

namespace {

int g_fail = 0, g_checks = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) ++g_fail;
  if (!ok || g_checks % 25 == 0) std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
}

enum class Kind { kNormal, kTies, kFlat, kSpecials, kFewFinite, kTopTies, kNoFinite, kTiny };
const char* kind_name(Kind k) {
  static const char* n[] = {"normal", "ties", "flat", "specials", "few_finite", "top_ties", "no_finite", "tiny"};
  return n[int(k)];
}

std::vector<float> make_row(std::mt19937_64& g, int64_t vocab, Kind kind) {
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::uniform_int_distribution<int64_t> at(0, vocab - 1);
  std::vector<float> r(static_cast<size_t>(vocab));
  for (auto& x : r) x = nd(g);
  switch (kind) {
    case Kind::kNormal: break;
    case Kind::kTies:
      for (auto& x : r) x = std::round(x * 4.0f) / 4.0f;  // ~100 distinct values: ties at every cut
      break;
    case Kind::kFlat: std::fill(r.begin(), r.end(), -2.5f); break;
    case Kind::kSpecials:
      for (int i = 0; i < 50; ++i) r[size_t(at(g))] = NAN;
      for (int i = 0; i < 50; ++i) r[size_t(at(g))] = -INFINITY;
      for (int i = 0; i < 3; ++i) r[size_t(at(g))] = INFINITY;
      for (int i = 0; i < 20; ++i) r[size_t(at(g))] = (i & 1) ? 0.0f : -0.0f;
      break;
    case Kind::kFewFinite:  // fewer finite values than most k
      for (auto& x : r) x = (at(g) % 97 == 0) ? std::round(nd(g)) : (at(g) % 2 ? NAN : -INFINITY);
      break;
    case Kind::kTopTies:  // 2000 copies of the maximum: the cut falls inside one value
      for (int i = 0; i < 2000; ++i) r[size_t(at(g))] = 40.0f;
      break;
    case Kind::kNoFinite:
      for (size_t i = 0; i < r.size(); ++i) r[i] = i % 2 ? NAN : -INFINITY;
      break;
    case Kind::kTiny:  // subnormals and zeros of both signs
      for (auto& x : r) x = float(int(at(g) % 5) - 2) * 1e-40f;
      break;
  }
  return r;
}

struct Gpu {
  cuda::DeviceBuffer row, out, temp;
  std::vector<int32_t> host;
  explicit Gpu(int64_t vocab)
      : row(size_t(vocab) * 4, "test row"),
        out(cuda::sample_reduce_words(cuda::kSampleReduceMaxK) * 4, "test out"),
        temp(sizeof(double), "test temperature"),
        host(cuda::sample_reduce_words(cuda::kSampleReduceMaxK)) {}
  // temperature > 0: also MTPLX's normaliser (exp_sum).
  void run(const std::vector<float>& r, int k, SampleCandidates& c, double temperature = 0) {
    DS4_CUDA_CHECK(cudaMemcpy(row.get(), r.data(), r.size() * 4, cudaMemcpyHostToDevice));
    DS4_CUDA_CHECK(cudaMemcpy(temp.get(), &temperature, sizeof(double), cudaMemcpyHostToDevice));
    DS4_CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));  // stale words must not pass
    cuda::sample_reduce_f32(row.as<float>(), int64_t(r.size()), k, temp.as<double>(), out.as<int32_t>(), nullptr);
    DS4_CUDA_CHECK(cudaMemcpy(host.data(), out.get(), cuda::sample_reduce_words(k) * 4, cudaMemcpyDeviceToHost));
    c.argmax = host[0];
    c.finite = host[2];
    c.vocab = int64_t(r.size());
    std::memcpy(&c.exp_sum, host.data() + 4, sizeof(double));
    const int n = std::max(0, std::min(host[1], k));
    const int32_t* ids = host.data() + cuda::kSampleReduceHeader;
    c.ids.assign(ids, ids + n);
    c.logits.resize(size_t(n));
    std::memcpy(c.logits.data(), ids + k, size_t(n) * 4);
  }
};

std::string hexf(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  char b[48];
  std::snprintf(b, sizeof b, "%.9g (0x%08x)", double(v), u);
  return b;
}

// GPU vs host reference; prints the first difference.
bool compare(const SampleCandidates& gpu, const SampleCandidates& ref, int count_word, int k, const std::string& name) {
  std::string why;
  if (gpu.argmax != ref.argmax) why = "argmax gpu " + std::to_string(gpu.argmax) + " host " + std::to_string(ref.argmax);
  else if (gpu.finite != ref.finite) why = "finite gpu " + std::to_string(gpu.finite) + " host " + std::to_string(ref.finite);
  else if (count_word != int(ref.ids.size()))
    why = "count gpu " + std::to_string(count_word) + " host " + std::to_string(ref.ids.size()) + " (k " + std::to_string(k) + ")";
  else
    for (size_t i = 0; i < ref.ids.size() && why.empty(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &gpu.logits[i], 4);
      std::memcpy(&b, &ref.logits[i], 4);
      if (gpu.ids[i] != ref.ids[i] || a != b)
        why = "position " + std::to_string(i) + ": gpu id " + std::to_string(gpu.ids[i]) + " logit " +
              hexf(gpu.logits[i]) + ", host id " + std::to_string(ref.ids[i]) + " logit " + hexf(ref.logits[i]);
    }
  // The normaliser (when asked): another summation order and the device exp, so close, not equal.
  if (why.empty() && (std::isnan(ref.exp_sum) != std::isnan(gpu.exp_sum) ||
                      std::fabs(gpu.exp_sum - ref.exp_sum) > 1e-10 * std::fabs(ref.exp_sum))) {
    char b[128];
    std::snprintf(b, sizeof b, "exp_sum gpu %.17g host %.17g (rel %.3g)", gpu.exp_sum, ref.exp_sum,
                  std::fabs(gpu.exp_sum - ref.exp_sum) / std::fabs(ref.exp_sum));
    why = b;
  }
  check(why.empty(), name + (why.empty() ? "" : ": " + why));
  return why.empty();
}

// Both samplers, several settings, draws from the GPU candidates vs from the row.
void check_draws(const std::vector<float>& row, const SampleCandidates& c, const std::string& name) {
  using engine::SamplerKind;
  using engine::SamplerParams;
  struct S {
    SamplerKind kind;
    SamplerParams p;
  };
  const S settings[] = {
      {SamplerKind::kDs4, {0.0, 1.0, 0, 0.0, 1}},     {SamplerKind::kDs4, {1.0, 1.0, 0, 0.05, 2}},
      {SamplerKind::kDs4, {0.7, 0.9, 40, 0.05, 3}},   {SamplerKind::kDs4, {1.0, 0.95, 1024, 0.0, 4}},
      {SamplerKind::kDs4, {2.0, 1.0, 256, 0.1, 5}},   {SamplerKind::kMtplx, {0.0, 0.95, 20, 0.0, 6}},
      // MTPLX sampling at T 1 (the candidates' exp_sum was computed at T 1): default and wider.
      {SamplerKind::kMtplx, {1.0, 0.95, 20, 0.0, 7}}, {SamplerKind::kMtplx, {1.0, 1.0, 200, 0.0, 8}},
  };
  for (const S& s : settings) {
    engine::Sampler full(s.kind, s.p), cand(s.kind, s.p);
    std::string why;
    int decided = 0;
    const bool nan_row = !std::all_of(row.begin(), row.end(), [](float x) { return std::isfinite(x); });
    if (s.kind == SamplerKind::kMtplx && s.p.temperature > 0 && nan_row) continue;  // MTPLX rejects it
    for (int d = 0; d < 6 && why.empty(); ++d) {
      const int32_t want = full.sample(row);
      std::optional<int32_t> got = cand.sample_from(c);
      if (got) decided++;
      else got = cand.sample(row);
      if (*got != want)
        why = "draw " + std::to_string(d) + ": candidates " + std::to_string(*got) + " row " + std::to_string(want);
    }
    char b[160];
    std::snprintf(b, sizeof b, "%s draws %s T=%.2f top_k=%d top_p=%.2f min_p=%.2f (%d/6 from candidates)", name.c_str(),
                  engine::sampler_kind_name(s.kind), s.p.temperature, s.p.top_k, s.p.top_p, s.p.min_p, decided);
    check(why.empty(), std::string(b) + (why.empty() ? "" : ": " + why));
  }
}

// The op captured once in a CUDA graph, replayed on new row contents (the models' use).
void check_graph(int64_t vocab, std::mt19937_64& g) {
  Gpu gpu(vocab);
  cudaStream_t s;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  const int k = cuda::kSampleReduceMaxK;
  DS4_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cuda::sample_reduce_f32(gpu.row.as<float>(), vocab, k, nullptr, gpu.out.as<int32_t>(), s);
  DS4_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DS4_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) {
    const auto row = make_row(g, vocab, rep == 1 ? Kind::kTies : Kind::kNormal);
    DS4_CUDA_CHECK(cudaMemcpy(gpu.row.get(), row.data(), row.size() * 4, cudaMemcpyHostToDevice));
    DS4_CUDA_CHECK(cudaGraphLaunch(exec, s));
    DS4_CUDA_CHECK(cudaStreamSynchronize(s));
    DS4_CUDA_CHECK(cudaMemcpy(gpu.host.data(), gpu.out.get(), gpu.host.size() * 4, cudaMemcpyDeviceToHost));
    SampleCandidates c, ref;
    c.argmax = gpu.host[0], c.finite = gpu.host[2], c.vocab = vocab;
    const int32_t* ids = gpu.host.data() + cuda::kSampleReduceHeader;
    c.ids.assign(ids, ids + gpu.host[1]);
    c.logits.resize(c.ids.size());
    std::memcpy(c.logits.data(), ids + k, c.ids.size() * 4);
    top_candidates(row, k, ref);
    compare(c, ref, gpu.host[1], k, "graph replay " + std::to_string(rep) + " vocab " + std::to_string(vocab));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// The rows form (a decode batch's rows in one launch): n rows of every kind at a stride past
// the vocabulary, each with its own temperature; row i's words equal the single-row op's on
// that row alone, byte for byte (exp_sum included: the same block code). Then its bad input.
void check_rows(int64_t vocab, int k, std::mt19937_64& g) {
  const int n = 9;
  const size_t stride = size_t(vocab) + 37;  // rows not 16-byte aligned past the first
  const size_t words = cuda::sample_reduce_words(k);
  std::vector<float> rows(stride * n, 1e30f);  // the gap values would win if read
  std::vector<double> temps(n);
  for (int i = 0; i < n; ++i) {
    const auto r = make_row(g, vocab, Kind(i % 8));
    std::copy(r.begin(), r.end(), rows.begin() + long(i * stride));
    temps[size_t(i)] = i % 3 == 0 ? 0.0 : 0.5 * i;
  }
  cuda::DeviceBuffer d_rows(rows.size() * 4, "test rows"), d_temps(n * sizeof(double), "test temps"),
      d_out(words * n * 4, "test rows out"), d_one(words * 4, "test one out");
  DS4_CUDA_CHECK(cudaMemcpy(d_rows.get(), rows.data(), rows.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(d_temps.get(), temps.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, d_out.bytes()));
  cuda::sample_reduce_f32_rows(d_rows.as<float>(), stride, n, vocab, k, d_temps.as<double>(), d_out.as<int32_t>(),
                               nullptr);
  std::vector<int32_t> all(words * n), one(words);
  DS4_CUDA_CHECK(cudaMemcpy(all.data(), d_out.get(), all.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    DS4_CUDA_CHECK(cudaMemset(d_one.get(), 0xff, d_one.bytes()));
    cuda::sample_reduce_f32(d_rows.as<float>() + size_t(i) * stride, vocab, k, d_temps.as<double>() + i,
                            d_one.as<int32_t>(), nullptr);
    DS4_CUDA_CHECK(cudaMemcpy(one.data(), d_one.get(), one.size() * 4, cudaMemcpyDeviceToHost));
    // Words past the count (the unused candidate slots) are never written by either: compare
    // the header, the ids and logits actually produced.
    const int cnt = std::max(0, std::min(one[1], k));
    const int32_t* a = all.data() + size_t(i) * words;
    bool same = std::memcmp(a, one.data(), cuda::kSampleReduceHeader * 4) == 0 &&
                std::memcmp(a + cuda::kSampleReduceHeader, one.data() + cuda::kSampleReduceHeader, size_t(cnt) * 4) == 0 &&
                std::memcmp(a + cuda::kSampleReduceHeader + k, one.data() + cuda::kSampleReduceHeader + k,
                            size_t(cnt) * 4) == 0;
    check(same, "sample_reduce_f32_rows vocab " + std::to_string(vocab) + " k " + std::to_string(k) + " row " +
                    std::to_string(i) + " (" + kind_name(Kind(i % 8)) + ") equals the row alone");
    SampleCandidates ref;
    std::vector<float> r(rows.begin() + long(i * stride), rows.begin() + long(i * stride + size_t(vocab)));
    top_candidates(r, CandidateRequest{k, 0.0}, ref);
    check(a[0] == ref.argmax && a[2] == ref.finite && a[1] == int(ref.ids.size()) &&
              std::equal(ref.ids.begin(), ref.ids.end(), a + cuda::kSampleReduceHeader),
          "sample_reduce_f32_rows row " + std::to_string(i) + " vs host top_candidates");
  }
  auto throws = [&](auto&& f, const std::string& what) {
    bool threw = false;
    try {
      f();
    } catch (const Error&) {
      threw = true;
    }
    check(threw, "sample_reduce_f32_rows throws on " + what);
  };
  throws([&] { cuda::sample_reduce_f32_rows(d_rows.as<float>(), stride, 0, vocab, k, nullptr, d_out.as<int32_t>(), nullptr); },
         "n = 0");
  throws([&] { cuda::sample_reduce_f32_rows(d_rows.as<float>(), size_t(vocab) - 1, 2, vocab, k, nullptr,
                                            d_out.as<int32_t>(), nullptr); },
         "a row stride below the vocabulary");
  throws([&] { cuda::sample_reduce_f32_rows(d_rows.as<float>(), stride, 2, vocab, 0, nullptr, d_out.as<int32_t>(), nullptr); },
         "k = 0");
}

// Informational: time of one op on a full-size row (no assertion; next to a decode step).
void time_op(int64_t vocab, int k, std::mt19937_64& g) {
  Gpu gpu(vocab);
  const auto row = make_row(g, vocab, Kind::kNormal);
  DS4_CUDA_CHECK(cudaMemcpy(gpu.row.get(), row.data(), row.size() * 4, cudaMemcpyHostToDevice));
  cudaEvent_t a, b;
  DS4_CUDA_CHECK(cudaEventCreate(&a));
  DS4_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) cuda::sample_reduce_f32(gpu.row.as<float>(), vocab, k, nullptr, gpu.out.as<int32_t>(), nullptr);
  const int reps = 100;
  DS4_CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) cuda::sample_reduce_f32(gpu.row.as<float>(), vocab, k, nullptr, gpu.out.as<int32_t>(), nullptr);
  DS4_CUDA_CHECK(cudaEventRecord(b));
  DS4_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  DS4_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  std::printf("time sample_reduce_f32 vocab %lld k %d: %.1f us per row (the full row copy would be %lld bytes)\n",
              (long long)vocab, k, 1000.0 * ms / reps, (long long)vocab * 4);
}

}  // namespace

int main(int argc, char** argv) {
  const bool small = argc > 1 && std::string(argv[1]) == "--small";
  try {
    std::mt19937_64 g(2026);
    std::vector<int64_t> vocabs = {1, 2, 31, 1000, 4097};
    if (!small) vocabs.insert(vocabs.end(), {129280, 151936, 154880});
    const int ks[] = {1, 2, 20, 256, 1000, 1024};
    for (int64_t vocab : vocabs) {
      Gpu gpu(vocab);
      for (int kind = 0; kind < 8; ++kind) {
        const auto row = make_row(g, vocab, Kind(kind));
        for (int k : ks) {
          SampleCandidates c, ref;
          const double t = k == 1024 ? 1.0 : 0.0;  // the normaliser too, for MTPLX's draws below
          gpu.run(row, k, c, t);
          top_candidates(row, CandidateRequest{k, t}, ref);
          const std::string name = "sample_reduce vocab " + std::to_string(vocab) + " " + kind_name(Kind(kind)) +
                                   " k " + std::to_string(k);
          if (compare(c, ref, gpu.host[1], k, name) && k == 1024 && vocab >= 1000) check_draws(row, c, name);
        }
      }
    }
    check_graph(small ? 4097 : 151936, g);
    check_rows(small ? 4097 : 129280, 1024, g);
    check_rows(small ? 1000 : 151936, 20, g);
    if (!small) {
      time_op(151936, 1024, g);
      time_op(129280, 1024, g);
      time_op(151936, 1, g);
    }
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d of %d check(s) failed\n", g_fail ? "FAILED" : "ALL PASSED", g_fail, g_checks);
  return g_fail ? 1 : 0;
}
