// Admission control on the CUDA models (engine/state_budget.h, engine_admission.cpp).
// Plain executable (no GoogleTest on the H200 image); exits 1 when any check fails.
//  1. Honest bytes: a CUDA state's bytes() is its device buffers, allocated for the whole
//     context at new_state(): Model::state_cost (the default: a measured fresh state, nothing
//     per token) equals a fresh state's bytes, feeding 40 tokens leaves them unchanged, and a
//     clone holds the same. The model's state_memory_available() is the free device memory
//     less the allocation headroom (0 < it < total). GLM 5.x and Qwen Next tiny models.
//  2. The engine on the CUDA GLM model under a budget of two states plus a byte: four
//     concurrent greedy turns wait for room (at most two states at a time, the prefix cache's
//     clones evicted to make room) and each emits exactly the ids it emits alone; afterwards
//     the live states hold 0 bytes and the cache stays within the budget.
// Usage: test_admission_cuda [root]   (root: the tree, default DS4_ROOT or ".")
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine_idle.h"
#include "backend/cuda/memory.h"
#include "engine/engine.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "recording_codec.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
using namespace std::chrono_literals;

namespace {

void honest_bytes(const std::string& tag, Model& m) {
  const StateCost cost = m.state_cost(false);
  auto st = m.new_state();
  check(double(st->bytes()) == cost.fixed && cost.per_token == 0,
        tag + ": state_cost = a fresh state's device bytes (" + std::to_string(st->bytes()) + "), 0 per token");
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(2 + i * 7 % 60);
  std::vector<float> logits;
  const size_t before = st->bytes();
  m.forward(*st, ids, Logits::kLast, logits);
  check(st->bytes() == before, tag + ": 40 tokens leave the device bytes unchanged");
  check(st->clone()->bytes() == before, tag + ": a clone holds the same bytes");
  const size_t avail = m.state_memory_available(), total = ds4::cuda::device_memory_info().total_bytes;
  check(avail > 0 && avail < total, tag + ": state_memory_available " + std::to_string(avail >> 20) + " MiB of " +
                                        std::to_string(total >> 20) + " MiB");
}

// A raw id prompt (RecordingCodec reads "#ids 5 9 ..." as those ids): 20 + 8i ids.
std::string prompt(int i) {
  std::string p = "#ids ";
  uint32_t x = 977u * uint32_t(i + 3);
  for (int k = 0; k < 20 + 8 * i; ++k) x = x * 1664525u + 1013904223u, p += std::to_string(1 + (x >> 9) % 1000) + " ";
  return p;
}

// Reads a turn to its end; false on an error or a timeout.
bool run_turn(const std::shared_ptr<engine::RequestHandle>& h) {
  for (;;) {
    auto ev = h->next(120s);
    if (!ev || ev->kind == engine::GenEvent::Kind::kError) return false;
    if (ev->kind == engine::GenEvent::Kind::kDone) return true;
  }
}

void engine_under_budget(const std::string& dir) {
  engine::IdLog log;
  auto make = [&](size_t budget) {
    LoadOptions o;
    auto m = glm5::load_cuda(dir, o);
    engine::EngineOptions eo;
    eo.prefill_chunk = 16;
    eo.state_memory_bytes = budget;
    log = std::make_shared<engine::IdLog::element_type>();
    return std::make_unique<engine::Engine>(
        std::move(m), std::make_unique<engine::RecordingCodec>(engine::TokCodec::open(dir, "glm5"), log), eo);
  };
  auto req = [](int i) {
    engine::GenRequest r;
    r.raw_prompt = prompt(i);
    r.max_tokens = 24;
    r.sampler.temperature = 0;
    return r;
  };
  std::vector<std::vector<int32_t>> alone;
  size_t fixed = 0;
  for (int i = 0; i < 4; ++i) {
    auto e = make(0);
    fixed = size_t(e->state_cost().fixed);
    check(run_turn(e->submit(req(i))), "glm5 engine: turn " + std::to_string(i) + " alone");
    alone.push_back((*log)[0]);
  }
  const size_t budget = 2 * fixed + 1;
  auto e = make(budget);
  std::vector<std::shared_ptr<engine::RequestHandle>> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(e->submit(req(i)));
  for (int i = 0; i < 4; ++i) {
    const bool done = run_turn(hs[size_t(i)]);
    // Turns start in submission order (FIFO admission): turn i's ids are the log's i-th.
    check(done && (*log)[size_t(i)] == alone[size_t(i)],
          "glm5 engine, budget of two states: turn " + std::to_string(i) + " emits its alone ids (" +
              std::to_string(alone[size_t(i)].size()) + ")");
  }
  const auto m = engine::wait_until_idle(*e);
  check(m.live == 0 && m.state_bytes == 0, "glm5 engine: live states hold 0 bytes after the run");
  // The budget admits two states at once: no iteration may decode more than two sessions (with
  // admission doing nothing, the four turns decode side by side).
  uint64_t over_two = 0;
  for (size_t b = 2; b < std::size(m.decode_steps_by_size); ++b) over_two += m.decode_steps_by_size[b];
  check(m.decode_iterations > 0 && over_two == 0,
        "glm5 engine: at most two sessions decode per iteration under a budget of two states (" +
            std::to_string(over_two) + " iterations with more)");
  check(m.cache_bytes <= budget, "glm5 engine: the prefix cache stays within the budget (" +
                                     std::to_string(m.cache_bytes) + " <= " + std::to_string(budget) + ")");
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("DS4_ROOT");
  const std::string root = argc > 1 ? argv[1] : env ? env : DS4_ROOT;
  try {
    LoadOptions o;
    honest_bytes("glm5", *glm5::load_cuda(root + "/tests/data/glm5/model", o));
    honest_bytes("qwen_next", *qwen_next::load_cuda(root + "/tests/data/qwen_next/model", o));
    engine_under_budget(root + "/tests/data/glm5/model");
  } catch (const std::exception& e) {
    check(false, std::string("exception: ") + e.what());
  }
  std::printf("%s (%d failed)\n", g_fail ? "FAIL" : "PASS", g_fail);
  return g_fail ? 1 : 0;
}
