#pragma once
// The checkpoint round trip the CUDA model tests share (test_glm5_cuda, test_qwen_next_cuda):
// both models consume `head`, save; fresh states load the GPU's sections on the GPU and on the
// CPU, the CPU's on the GPU; then every state runs `rest` with all logits. The tests compare
// the rows (GPU -> GPU bit for bit, across devices within their tolerance) and corrupt
// `from_gpu` for their refusal cases.
#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"

namespace ds4::cuda_test {

struct CheckpointRows {
  std::vector<float> gpu, gpu_loaded;   // the saved GPU state and a GPU state loaded from it
  std::vector<float> cpu_loaded, cpu;   // a CPU state loaded from the GPU's sections; the CPU's own state
  std::vector<float> gpu_from_cpu;      // a GPU state loaded from the CPU's sections
  std::vector<StateSection> from_gpu;   // the GPU state's sections after `head`
  int64_t loaded_position = -1;         // position of every loaded state (-1 if they differ)
};

inline CheckpointRows checkpoint_round_trip(Model& cpu, Model& gpu, std::span<const int32_t> head,
                                            std::span<const int32_t> rest) {
  CheckpointRows r;
  std::vector<StateSection> from_cpu;
  auto gs = gpu.new_state(), cs = cpu.new_state();
  gpu.prefill(*gs, head);
  cpu.prefill(*cs, head);
  gs->save(r.from_gpu);
  cs->save(from_cpu);
  auto g2 = gpu.new_state(), c2 = cpu.new_state(), g3 = gpu.new_state();
  g2->load(r.from_gpu);
  c2->load(r.from_gpu);
  g3->load(from_cpu);
  if (g2->position() == c2->position() && c2->position() == g3->position()) r.loaded_position = g2->position();
  gpu.forward(*gs, rest, Logits::kAll, r.gpu);
  gpu.forward(*g2, rest, Logits::kAll, r.gpu_loaded);
  cpu.forward(*c2, rest, Logits::kAll, r.cpu_loaded);
  cpu.forward(*cs, rest, Logits::kAll, r.cpu);
  gpu.forward(*g3, rest, Logits::kAll, r.gpu_from_cpu);
  return r;
}

}  // namespace ds4::cuda_test
