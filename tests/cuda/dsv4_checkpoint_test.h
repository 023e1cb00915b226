#pragma once
// Checkpoint round trips of the CUDA DeepSeek V4 state (src/models/deepseek_v4/cuda/state_io.cu),
// shared by test_deepseek_v4_cuda (trunk), test_deepseek_v4_mtp_cuda and
// test_deepseek_v4_dspark_cuda (heads). After `prompt` (long enough to wrap the window ring and
// close compressor windows, ending inside an open window):
//   GPU save -> fresh GPU load: the next logits bit-identical, the next draft equal;
//   GPU save -> CPU load, CPU save -> GPU load: the next logits within `tol`, drafts equal;
//   corrupted sections (a row short in an open compressor window, which only the GPU's size
//   checks see; a float short in a window) refused with InputError, the state unchanged.
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/model.h"
#include "test_common.h"

namespace ds4::cuda_test {

// depth 0: no draft head. `corrupt_pend` names an open window's pend_kv section at the prompt's
// length, `row` its row width in floats.
struct CheckpointCase {
  std::string name;
  int32_t next = 0;  // the token decoded after the load
  int depth = 0;
  float tol = 1e-3f;
  std::string corrupt_pend;
  size_t row = 0;
};

inline std::vector<int32_t> checkpoint_draft(Model& m, ModelState& s, const CheckpointCase& k) {
  std::vector<int32_t> d;
  if (k.depth > 0) m.draft_head()->draft(s, k.next, k.depth, d);
  return d;
}

// Whether loading `sections` into `s` is refused with InputError (the message printed).
inline bool load_refused(ModelState& s, const std::vector<StateSection>& sections) {
  try {
    s.load(sections);
  } catch (const InputError& e) {
    std::printf("     (%s)\n", e.what());
    return true;
  }
  return false;
}

inline void checkpoint_round_trips(Model& cpu, Model& gpu, const std::vector<int32_t>& prompt, const CheckpointCase& k) {
  auto gs = gpu.new_state(), cs = cpu.new_state();
  if (k.depth > 0) gpu.draft_head()->enable_draft(*gs), cpu.draft_head()->enable_draft(*cs);
  std::vector<float> lg;
  gpu.forward(*gs, prompt, Logits::kNone, lg);
  cpu.forward(*cs, prompt, Logits::kNone, lg);
  std::vector<StateSection> from_gpu, from_cpu;
  gs->save(from_gpu);
  cs->save(from_cpu);
  // fresh states, no enable_draft: the sections carry whether the heads record
  auto g2 = gpu.new_state(), c2 = cpu.new_state(), g3 = gpu.new_state();
  g2->load(from_gpu);
  c2->load(from_gpu);
  g3->load(from_cpu);

  std::vector<StateSection> short_pend = from_gpu, short_window = from_gpu;
  bool found = false;
  for (auto& s : short_pend)
    if (s.name == k.corrupt_pend && s.bytes.size() >= k.row * sizeof(float))
      s.bytes.resize(s.bytes.size() - k.row * sizeof(float)), found = true;
  for (auto& s : short_window)
    if (s.name == "layer.0.window" && !s.bytes.empty()) s.bytes.resize(s.bytes.size() - sizeof(float));
  const bool refused = found && load_refused(*gs, short_pend) && load_refused(*gs, short_window);
  check(refused && gs->position() == int64_t(prompt.size()),
        k.name + ": checkpoint with a row short in '" + k.corrupt_pend + "' / a float short in layer.0.window throws "
        "InputError (position unchanged)");

  const auto d_gs = checkpoint_draft(gpu, *gs, k), d_g2 = checkpoint_draft(gpu, *g2, k);
  const auto d_c2 = checkpoint_draft(cpu, *c2, k), d_cs = checkpoint_draft(cpu, *cs, k);
  const auto d_g3 = checkpoint_draft(gpu, *g3, k);
  const auto a = gpu.decode(*gs, k.next), b = gpu.decode(*g2, k.next);
  const auto c = cpu.decode(*c2, k.next), d = cpu.decode(*cs, k.next), e = gpu.decode(*g3, k.next);
  const std::string at = " at " + std::to_string(prompt.size());
  check(!a.empty() && a == b && d_gs == d_g2 && d_gs.size() == size_t(k.depth > 0 ? k.depth : 0),
        k.name + ": GPU -> GPU checkpoint" + at + ": next logits bit-identical, draft equal (the refused loads left "
        "the saved state as it was)");
  const float d1 = c.size() == a.size() ? max_diff(c.data(), a.data(), a.size()) : 1e30f;
  const float d2 = e.size() == d.size() ? max_diff(e.data(), d.data(), d.size()) : 1e30f;
  char buf[240];
  std::snprintf(buf, sizeof buf,
                ": GPU -> CPU: max |diff| vs the GPU %.3g; CPU -> GPU: vs the CPU %.3g (tol %.0e); drafts equal: %s",
                double(d1), double(d2), double(k.tol), d_c2 == d_gs && d_g3 == d_cs ? "yes" : "NO");
  check(d1 <= k.tol && d2 <= k.tol && d_c2 == d_gs && d_g3 == d_cs, k.name + buf);
  // one step later: the loaded states keep recording (rings, lanes, heads) as the saved one
  const auto n_gs = checkpoint_draft(gpu, *gs, k), n_g2 = checkpoint_draft(gpu, *g2, k);
  const auto n_g3 = checkpoint_draft(gpu, *g3, k), n_cs = checkpoint_draft(cpu, *cs, k);
  const auto a2 = gpu.decode(*gs, k.next), b2 = gpu.decode(*g2, k.next);
  check(a2 == b2 && n_gs == n_g2 && n_g3 == n_cs, k.name + ": one step after the load: GPU -> GPU logits bit-identical, "
        "drafts equal (GPU -> GPU and CPU -> GPU vs CPU)");
}

}  // namespace ds4::cuda_test
