// The CUDA Qwen3.8 Flash Next model against the CPU model and the golden vectors.
// Plain executable (no GoogleTest on the H200 image); exits 1 when any check fails.
//  1. tests/data/qwen_next tiny model (F32), prompts p1/p7/p64/p300: prefill last logits and
//     32 teacher-forced decode rows within kTol of the golden rows AND of the CPU model's
//     rows; argmax of every row = the golden greedy tokens.
//  2. The model run without CUDA graphs and without stacked projections (one gemv per
//     matrix) gives bit-identical logits (gemv rows do not depend on their neighbours); a cloned state
//     continues bit-identically; Logits::kAll rows match the CPU's kAll rows.
//  3. models/default (bf16): 64 greedy tokens from each prompt of
//     tests/data/default_model/greedy.json equal to the CPU model's (and the torch golden
//     greedy prefix).
//  4. Bad input: a token outside the vocabulary and a context overflow throw InputError.
//  5. Multi-row forward (chunk.cu: prefill chunks / speculative verify; items 1-2 run chunked
//     too now: prefill and kAll of > 1 token use it): chunks of 2/4/7/16/17/300 rows give
//     bit-identical kAll rows, kLast row and following decode steps to as many decode steps
//     on the same GPU model. The windows cross QSA block boundaries (idx_ratio 4), the point
//     where the indexer starts to drop blocks (position 36: budget 32) and the 16-row chunk
//     boundary. A 17-row chunk after 33 tokens matches the CPU model's kAll rows within kTol.
//  6. Captured-prefix commit (verify_capture + commit_prefix(keep), every keep in 1..rows, for
//     2/4/5/7/8 rows and 16 rows with capture_rows 16):
//     the next decode steps equal bit for bit those of a state that consumed only the kept
//     tokens by decode steps, and the positions agree; committing one row too many is detected
//     (different logits); bad keeps and a too-long window are refused; two states' windows
//     pending at once both commit (per-state records).
//  7. Checkpoints (save/load through the CPU State's sections, cuda/state_io.cu) after 40
//     tokens of p64: GPU -> fresh GPU state continues bit-identically (24 kAll rows); GPU ->
//     CPU model within kTol of the GPU and of the CPU's own state; CPU -> GPU within kTol of
//     the CPU; a section one row short and a state holding a captured window are refused
//     with InputError, and the refused load leaves the state as it was (bit-identical rows).
//  8. The tensor-core prefill chunk (gemm_rows 64: TF32 dense products) vs the CPU model: a
//     300-row chunk (kAll) and 32 decode steps after it within the bounds stated and derived
//     in qwen_next_tensor_cores.h (mean, median row max, max |diff|, argmax share), and so
//     does a prompt of kMaxPrefillRows + 52 tokens in kMaxPrefillRows chunks (kAll); chunks
//     below gemm_rows stay bit-identical to the exact model. Items 1-7 load the exact model
//     (the default, gemm_rows 0), where a prefill of up to 512 rows is one exact chunk.
//  9. backend/cuda delta_rule_rows at the full-size head width (128: the register kernel the
//     tiny model never reaches; also value widths 24 and 192 and a decay per key channel):
//     rows in one launch = one-row launches bit for bit, and within 1e-4 (relative) of a double
//     host recurrence (delta_rule_rows_check.h).
// Usage: test_qwen_next_cuda [root] [--quick]   (root: the tree, default DS4_ROOT or ".";
//   --quick: tiny prompts p7 and p64 and the extras only, for compute-sanitizer)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/tensor_source.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/model.h"
#include "checkpoint_round_trip.h"
#include "delta_rule_rows_check.h"
#include "qwen_next_tensor_cores.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

// Golden rule of tests/data/qwen_next/README.md for float32 implementations; the same bound
// is used against the CPU model (measured CUDA-vs-CPU differences are printed).
constexpr float kTol = 1e-4f;
// p300 holds a MoE routing near-tie: at prompt row 276 (in some layer) the 2nd and 3rd
// router probabilities are 0.14939804 and 0.14939800 (gap 4.5e-8, two float ulps), so the
// pick depends on float summation order. The CPU follows the oracle; the GPU takes the other
// expert. Forcing that one flip on the CPU model reproduces the GPU's deviation exactly
// (max |logit diff| 5.74e-4 vs golden, measured 2026-12-01 with a patched moe.cpp). Every row
// after 276 carries it, so p300 is held to kNearTieTol (and argmax equality on every row).
constexpr float kNearTieTol = 1e-3f;

void tiny_prompt(Model& cpu, Model& gpu, Model& gpu_nograph, const TensorSource& g, const std::string& p) {
  const auto tokens = golden<int32_t>(g, p + ".tokens");
  const auto greedy = golden<int32_t>(g, p + ".greedy");
  const auto ref_prefill = golden<float>(g, p + ".prefill_logits");
  const auto ref_decode = golden<float>(g, p + ".decode_logits");
  const int64_t V = gpu.info().vocab_size;
  auto sc = cpu.new_state(), sg = gpu.new_state(), sn = gpu_nograph.new_state();
  auto lc = cpu.prefill(*sc, tokens), lg = gpu.prefill(*sg, tokens), ln = gpu_nograph.prefill(*sn, tokens);
  float vs_gold = max_diff(lg.data(), ref_prefill.data(), size_t(V));
  float vs_cpu = max_diff(lg.data(), lc.data(), size_t(V));
  float vs_nograph = max_diff(lg.data(), ln.data(), size_t(V));
  bool tokens_ok = argmax(lg.data(), V) == greedy[0];
  for (size_t i = 0; i < greedy.size(); ++i) {
    lc = cpu.decode(*sc, greedy[i]);
    lg = gpu.decode(*sg, greedy[i]);
    ln = gpu_nograph.decode(*sn, greedy[i]);
    vs_gold = std::max(vs_gold, max_diff(lg.data(), ref_decode.data() + i * V, size_t(V)));
    vs_cpu = std::max(vs_cpu, max_diff(lg.data(), lc.data(), size_t(V)));
    vs_nograph = std::max(vs_nograph, max_diff(lg.data(), ln.data(), size_t(V)));
    if (i + 1 < greedy.size()) tokens_ok = tokens_ok && argmax(lg.data(), V) == greedy[i + 1];
  }
  char buf[320];
  const float tol = p == "p300" ? kNearTieTol : kTol;
  std::snprintf(buf, sizeof buf, "tiny %s (%zu tokens): prefill + %zu decode rows, max |diff| vs golden %.3g, vs CPU %.3g (tol %.0e%s)",
                p.c_str(), tokens.size(), greedy.size(), vs_gold, vs_cpu, double(tol),
                p == "p300" ? ": MoE near-tie at row 276, see kNearTieTol" : "");
  check(vs_gold <= tol && vs_cpu <= tol, buf);
  check(tokens_ok, "tiny " + p + ": argmax of every row = golden greedy tokens");
  std::snprintf(buf, sizeof buf, "tiny %s: graph + stacked projections vs direct launches + one gemv per matrix: max |diff| %.3g (must be 0)", p.c_str(),
                vs_nograph);
  check(vs_nograph == 0.f, buf);
}

void tiny_extras(Model& cpu, Model& gpu, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  const int64_t V = gpu.info().vocab_size;
  // Clone mid-stream: both copies continue bit-identically.
  auto s = gpu.new_state();
  gpu.prefill(*s, std::span<const int32_t>(tokens.data(), 40));
  auto c = s->clone();
  std::vector<float> a, b;
  const std::span<const int32_t> rest(tokens.data() + 40, tokens.size() - 40);
  gpu.forward(*s, rest, Logits::kAll, a);
  gpu.forward(*c, rest, Logits::kAll, b);
  check(a.size() == rest.size() * size_t(V) && a == b, "tiny p64: cloned state continues bit-identically (24 rows)");
  // kAll over a whole prompt vs the CPU's kAll.
  auto sc = cpu.new_state(), sg = gpu.new_state();
  cpu.forward(*sc, tokens, Logits::kAll, a);
  gpu.forward(*sg, tokens, Logits::kAll, b);
  char buf[160];
  const float d = a.size() == b.size() ? max_diff(b.data(), a.data(), a.size()) : INFINITY;
  std::snprintf(buf, sizeof buf, "tiny p64: Logits::kAll, 64 rows, max |diff| vs CPU %.3g (tol %.0e)", d, double(kTol));
  check(d <= kTol, buf);
  // Bad input.
  bool threw = false;
  try {
    gpu.decode(*sg, int32_t(V));
  } catch (const InputError&) {
    threw = true;
  }
  check(threw, "token id == vocab throws InputError");
  threw = false;
  std::vector<int32_t> many(size_t(gpu.info().max_context), 1);
  try {
    gpu.forward(*sg, many, Logits::kNone, a);
  } catch (const InputError&) {
    threw = true;
  }
  check(threw, "context overflow throws InputError");
}

std::vector<int32_t> greedy_run(Model& m, const std::vector<int32_t>& prompt, int n, std::vector<float>& margins) {
  auto s = m.new_state();
  auto l = m.prefill(*s, prompt);
  std::vector<int32_t> out;
  const int64_t V = m.info().vocab_size;
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(l.data(), V);
    std::vector<float> sorted(l);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    margins.push_back(sorted[0] - sorted[1]);
    out.push_back(t);
    if (i + 1 < n) l = m.decode(*s, t);
  }
  return out;
}

void default_model(const std::string& root) {
  const std::string dir = root + "/models/default";
  LoadOptions o;
  auto cpu = qwen_next::load(dir, o);
  auto gpu = qwen_next::load_cuda(dir, o);
  std::ifstream f(root + "/tests/data/default_model/greedy.json");
  const auto j = nlohmann::json::parse(f);
  for (const auto& cs : j["cases"]) {
    const auto prompt = cs["prompt"].get<std::vector<int32_t>>();
    const auto gold = cs["greedy"].get<std::vector<int32_t>>();
    std::vector<float> mc, mg;
    const auto tc = greedy_run(*cpu, prompt, 64, mc);
    const auto tg = greedy_run(*gpu, prompt, 64, mg);
    size_t same = 0;
    while (same < tc.size() && tc[same] == tg[same]) ++same;
    const bool gold_ok = std::equal(gold.begin(), gold.end(), tg.begin());
    char buf[200];
    std::snprintf(buf, sizeof buf, "default %s: CUDA greedy 64 tokens = CPU (%zu equal), torch golden prefix (%zu) %s, min top-2 margin %.3g",
                  cs["name"].get<std::string>().c_str(), same, gold.size(), gold_ok ? "equal" : "DIFFERENT",
                  double(*std::min_element(mg.begin(), mg.end())));
    check(same == tc.size() && gold_ok, buf);
  }
}

// Multi-row forward against the same model run one decode step per token: from a state that
// consumed `prefix` tokens by decode steps, the next T tokens as one forward() (chunks of up
// to 16 rows) vs T decode() calls; then 3 decode steps on both. Expected bit-identical
// (every chunk kernel runs the decode step's arithmetic per row; gemv_rows equals the step's
// direct-path gemv).
void chunk_vs_steps(Model& m, const std::vector<int32_t>& tokens, int64_t prefix, const std::vector<int64_t>& counts,
                    const std::string& what) {
  const int64_t V = m.info().vocab_size;
  for (int64_t T : counts) {
    if (prefix + T + 3 > int64_t(tokens.size())) throw Error("chunk_vs_steps: not enough tokens");
    auto sa = m.new_state(), sb = m.new_state();
    for (int64_t i = 0; i < prefix; ++i) {
      m.decode(*sa, tokens[size_t(i)]);
      m.decode(*sb, tokens[size_t(i)]);
    }
    auto sc = sa->clone();
    const std::span<const int32_t> rows(tokens.data() + prefix, size_t(T));
    std::vector<float> a, last;
    m.forward(*sa, rows, Logits::kAll, a);
    m.forward(*sc, rows, Logits::kLast, last);
    int64_t first_bad = -1;
    float worst = 0.f;
    for (int64_t t = 0; t < T; ++t) {
      const auto b = m.decode(*sb, rows[size_t(t)]);
      const float dd = max_diff(a.data() + t * V, b.data(), size_t(V));
      worst = std::max(worst, dd);
      if (dd != 0.f && first_bad < 0) first_bad = t;
    }
    const bool last_ok = std::equal(last.begin(), last.end(), a.begin() + (T - 1) * V) && int64_t(last.size()) == V;
    float after = 0.f;
    bool pos_ok = sa->position() == sb->position() && sc->position() == sb->position();
    for (int64_t i = 0; i < 3; ++i) {
      const int32_t next = tokens[size_t(prefix + T + i)];
      const auto x = m.decode(*sa, next), y = m.decode(*sb, next), z = m.decode(*sc, next);
      after = std::max({after, max_diff(x.data(), y.data(), size_t(V)), max_diff(z.data(), y.data(), size_t(V))});
    }
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s: chunk of %lld rows after %lld tokens = %lld decode steps: kAll max |diff| %.3g (first row off: %lld), "
                  "kLast = last kAll row %s, next 3 steps max |diff| %.3g, positions %s (all must be 0 / yes)",
                  what.c_str(), (long long)T, (long long)prefix, (long long)T, worst, (long long)first_bad,
                  last_ok ? "yes" : "NO", after, pos_ok ? "agree" : "DIFFER");
    check(worst == 0.f && last_ok && after == 0.f && pos_ok, buf);
  }
}

// A chunk that starts mid-context (rows cross a QSA block boundary, the indexer's pruning
// point at position 36 and the 16-row chunk boundary) against the CPU model's kAll rows.
void chunk_vs_cpu(Model& cpu, Model& gpu, const std::vector<int32_t>& tokens, int64_t prefix, int64_t T) {
  auto sc = cpu.new_state(), sg = gpu.new_state();
  std::vector<float> a, b;
  const std::span<const int32_t> head(tokens.data(), size_t(prefix)), rows(tokens.data() + prefix, size_t(T));
  cpu.forward(*sc, head, Logits::kNone, a);
  gpu.forward(*sg, head, Logits::kNone, b);
  cpu.forward(*sc, rows, Logits::kAll, a);
  gpu.forward(*sg, rows, Logits::kAll, b);
  const float d = a.size() == b.size() ? max_diff(b.data(), a.data(), a.size()) : INFINITY;
  char buf[200];
  std::snprintf(buf, sizeof buf, "tiny chunk of %lld rows after %lld tokens: kAll max |diff| vs CPU %.3g (tol %.0e)",
                (long long)T, (long long)prefix, d, double(kTol));
  check(d <= kTol, buf);
}

// The logits of 2 decode steps (tokens a, b) from `s`, concatenated.
std::vector<float> next_two(Model& m, ModelState& s, int32_t a, int32_t b) {
  auto x = m.decode(s, a);
  const auto y = m.decode(s, b);
  x.insert(x.end(), y.begin(), y.end());
  return x;
}

// verify_capture + commit_prefix(keep) for every keep against decode steps of the kept tokens.
void captured_commit(qwen_next::QwenNextCudaModel& m, const std::vector<int32_t>& tokens, int64_t prefix,
                     const std::vector<int64_t>& counts) {
  const int64_t V = m.info().vocab_size;
  auto base = m.new_state();
  for (int64_t i = 0; i < prefix; ++i) m.decode(*base, tokens[size_t(i)]);
  const int32_t x0 = tokens[size_t(prefix + 20)], x1 = tokens[size_t(prefix + 21)];
  for (int64_t T : counts) {
    const std::span<const int32_t> rows(tokens.data() + prefix, size_t(T));
    std::vector<float> chunk_rows;
    {
      auto s = base->clone();
      m.forward(*s, rows, Logits::kAll, chunk_rows);
    }
    std::vector<std::vector<float>> ref(size_t(T) + 1);  // ref[k]: next steps after keeping k rows
    std::vector<int64_t> ref_pos(size_t(T) + 1);
    for (int64_t k = 1; k <= T; ++k) {
      auto s = base->clone();
      for (int64_t i = 0; i < k; ++i) m.decode(*s, rows[size_t(i)]);
      ref_pos[size_t(k)] = s->position();
      ref[size_t(k)] = next_two(m, *s, x0, x1);
    }
    int64_t bad = 0, first_bad = -1;
    bool logits_ok = true;
    for (int64_t k = 1; k <= T; ++k) {
      auto trial = base->clone();
      std::vector<float> lg;
      const bool captured = m.verify_capture(*trial, rows, lg);
      logits_ok = logits_ok && captured && lg == chunk_rows;
      m.commit_prefix(*trial, k);
      const bool pos_ok = trial->position() == ref_pos[size_t(k)] && trial->position() == base->position() + k;
      const auto got = next_two(m, *trial, x0, x1);
      const bool ok = pos_ok && got.size() == ref[size_t(k)].size() &&
                      max_diff(got.data(), ref[size_t(k)].data(), got.size()) == 0.f;
      if (!ok) {
        ++bad;
        if (first_bad < 0) first_bad = k;
      }
    }
    char buf[260];
    std::snprintf(buf, sizeof buf,
                  "captured commit, %lld verify rows after %lld tokens: verify logits = chunk kAll %s; keep 1..%lld: "
                  "%lld of %lld commits differ from decode steps of the kept tokens (first keep %lld; must be 0)",
                  (long long)T, (long long)prefix, logits_ok ? "yes" : "NO", (long long)T, (long long)bad, (long long)T,
                  (long long)first_bad);
    check(logits_ok && bad == 0, buf);
    if (T >= 3) {  // sanity: the comparison sees a commit of the wrong length
      auto trial = base->clone();
      std::vector<float> lg;
      m.verify_capture(*trial, rows, lg);
      m.commit_prefix(*trial, 2);
      const auto got = next_two(m, *trial, x0, x1);
      const float d = max_diff(got.data(), ref[3].data(), got.size());
      std::snprintf(buf, sizeof buf, "captured commit of %lld rows: keep 2 vs the reference of keep 3 differs (max |diff| %.3g > 0)",
                    (long long)T, d);
      check(d > 0.f, buf);
    }
  }
  // Refusals: keep out of 1..rows, no window, a window longer than a chunk. A second state's
  // window beside a pending one supersedes nothing (per-state records: two windows of
  // different lengths and keeps, test_qwen_next_batch_cuda item 3).
  const std::span<const int32_t> rows(tokens.data() + prefix, 4);
  std::vector<float> lg;
  auto expect_throw = [&](const char* what, auto&& f) {
    bool threw = false;
    try {
      f();
    } catch (const Error&) {
      threw = true;
    }
    check(threw, std::string("captured commit: ") + what + " throws");
  };
  auto t1 = base->clone(), t2 = base->clone();
  m.verify_capture(*t1, rows, lg);
  expect_throw("keep 0", [&] { m.commit_prefix(*t1, 0); });
  expect_throw("keep rows + 1", [&] { m.commit_prefix(*t1, 5); });
  expect_throw("verify_capture over an uncommitted window", [&] { m.verify_capture(*t1, rows, lg); });
  m.verify_capture(*t2, rows, lg);  // t1's window stays pending beside it
  m.commit_prefix(*t1, 2);
  m.commit_prefix(*t2, 2);
  check(t1->position() == base->position() + 2 && t2->position() == base->position() + 2 &&
            next_two(m, *t1, x0, x1) == next_two(m, *t2, x0, x1),
        "captured commit: two states' windows pending at once both commit (keep 2: equal next steps)");
  expect_throw("commit without a window", [&] { m.commit_prefix(*t2, 1); });
  auto t3 = base->clone();
  const std::span<const int32_t> long_rows(tokens.data() + prefix, 17);
  const bool captured = m.verify_capture(*t3, long_rows, lg);
  check(!captured && t3->position() == base->position(),
        "captured commit: verify_capture of 17 rows (> capture_rows) returns false and leaves the state");
}

// Item 7: checkpoints across the CPU and CUDA states.
void checkpoints(Model& cpu, qwen_next::QwenNextCudaModel& gpu, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  const std::span<const int32_t> head(tokens.data(), 40), rest(tokens.data() + 40, tokens.size() - 40);
  // The refused load below goes into a state that consumed `head` (a clone to compare with).
  auto keep = gpu.new_state();
  gpu.prefill(*keep, head);
  CheckpointRows r = checkpoint_round_trip(cpu, gpu, head, rest);
  const std::vector<float>&a = r.gpu, &b = r.gpu_loaded, &c = r.cpu_loaded, &d = r.cpu, &e = r.gpu_from_cpu;
  std::vector<StateSection>& from_gpu = r.from_gpu;
  check(r.loaded_position == 40, "checkpoint: loaded positions are 40");
  check(!a.empty() && a == b, "checkpoint GPU -> GPU at position 40 continues bit-identically (24 rows)");
  char buf[240];
  const float d1 = c.size() == a.size() ? max_diff(c.data(), a.data(), a.size()) : INFINITY;
  const float d1c = c.size() == d.size() ? max_diff(c.data(), d.data(), d.size()) : INFINITY;
  const float d2 = e.size() == d.size() ? max_diff(e.data(), d.data(), d.size()) : INFINITY;
  std::snprintf(buf, sizeof buf,
                "checkpoint GPU -> CPU: max |diff| vs the GPU %.3g, vs the CPU's own state %.3g; CPU -> GPU: vs the CPU "
                "%.3g (tol %.0e)",
                d1, d1c, d2, double(kTol));
  check(d1 <= kTol && d1c <= kTol && d2 <= kTol, buf);

  // A corrupted section (an attention layer's K one row short): refused before any copy.
  bool cut = false;
  for (auto& sec : from_gpu) {
    const std::string& n = sec.name;
    if (!cut && n.rfind("layer.", 0) == 0 && n.size() > 2 && n.compare(n.size() - 2, 2, ".k") == 0 && !sec.bytes.empty()) {
      sec.bytes.resize(sec.bytes.size() - sec.bytes.size() / 40);  // {40, kv_heads*head_dim}: one row short
      cut = true;
    }
  }
  auto refused = [](const char* what, auto&& f) {
    bool threw = false;
    try {
      f();
    } catch (const InputError& ex) {
      threw = true;
      std::printf("     (%s)\n", ex.what());
    }
    check(threw, std::string("checkpoint: ") + what + " throws InputError");
  };
  auto target = keep->clone();
  refused("a K section one row short", [&] { target->load(from_gpu); });
  std::vector<float> x, y;
  gpu.forward(*target, rest, Logits::kAll, x);
  gpu.forward(*keep, rest, Logits::kAll, y);
  check(cut && target->position() == 64 && !x.empty() && x == y,
        "checkpoint: the refused load left the state as it was (next 24 rows bit-identical)");

  // A captured verify window is neither kept nor dropped yet: save refuses it.
  auto trial = gpu.new_state();
  gpu.prefill(*trial, head);
  std::vector<float> lg;
  gpu.verify_capture(*trial, std::span<const int32_t>(rest.data(), 4), lg);
  std::vector<StateSection> sections;
  refused("saving an uncommitted captured window", [&] { trial->save(sections); });
  gpu.commit_prefix(*trial, 2);
  trial->save(sections);
  check(!sections.empty(), "checkpoint: after commit_prefix the state saves");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string& root = args.root;
  const bool quick = args.quick;
  try {
    const std::string tiny = root + "/tests/data/qwen_next/model";
    LoadOptions o;
    auto cpu = qwen_next::load(tiny, o);
    auto gpu = qwen_next::load_cuda(tiny, o);
    auto gpu_nograph = qwen_next::load_cuda(tiny, o, qwen_next::CudaModelOptions{false, false});
    auto g = open_tensor_source(root + "/tests/data/qwen_next/golden.safetensors");
    const std::vector<std::string> prompts =
        quick ? std::vector<std::string>{"p7", "p64"} : std::vector<std::string>{"p1", "p7", "p64", "p300"};
    for (const auto& p : prompts) tiny_prompt(*cpu, *gpu, *gpu_nograph, *g, p);
    tiny_extras(*cpu, *gpu, *g);
    auto p300 = golden<int32_t>(*g, "p300.tokens");  // + p64: room for 300 rows and the steps after
    const auto p64 = golden<int32_t>(*g, "p64.tokens");
    p300.insert(p300.end(), p64.begin(), p64.end());
    if (quick) {  // compute-sanitizer: a short verify, a partial chunk, a chunk boundary
      chunk_vs_steps(*gpu, p300, 33, {2, 7, 17}, "tiny chunk");
      captured_commit(static_cast<qwen_next::QwenNextCudaModel&>(*gpu), p300, 33, {4});
    } else {
      chunk_vs_steps(*gpu, p300, 33, {2, 4, 7, 16, 17}, "tiny chunk");
      chunk_vs_cpu(*cpu, *gpu, p300, 33, 17);
      chunk_vs_steps(*gpu, p300, 0, {2, 16, 17, 300}, "tiny chunk");
      chunk_vs_steps(*gpu_nograph, p300, 30, {7, 40}, "tiny chunk, direct launches + unstacked");
      captured_commit(static_cast<qwen_next::QwenNextCudaModel&>(*gpu), p300, 33, {2, 4, 7, 8});
      captured_commit(static_cast<qwen_next::QwenNextCudaModel&>(*gpu), p300, 5, {5});
      qwen_next::CudaModelOptions co16;
      co16.capture_rows = 16;  // a whole chunk of records, its block boundaries and the 16-row graph
      qwen_next::QwenNextCudaModel gpu16(open_tensor_source(tiny), o, co16);
      captured_commit(gpu16, p300, 33, {16});
      tensor_core_chunk(*cpu, *gpu, tiny, o, p300);
    }
    delta_rule_rows_check();
    checkpoints(*cpu, static_cast<qwen_next::QwenNextCudaModel&>(*gpu), *g);
    if (!quick) default_model(root);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  return summary();
}
