#pragma once
// Diagnostics (issue #22): the CPU model with the operand rounding of the CUDA tensor-core
// chunk (models/deepseek_v4/cuda/chunk.cu from CudaModelOptions' tensor-core rows), so that
// "CPU exact vs CPU emulated" tells how far TF32 / BF16 operands alone move the logits, apart
// from any bug of the GPU path. The products the chunk runs on tensor cores, per layer:
//   TF32 (cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32: both operands to a 10-bit mantissa, FP32 sums):
//     q_a, kv, the attention compressor's kv / gate, q_b, o_a (per group), o_b, the shared
//     expert's gate / up / down, and lm_head; attention's scores and weighted sum (q, the
//     key / value rows, the softmax weights; cuda/attention_tc.cu, emulated in attention.cpp);
//   BF16 (grouped_mma_bf16: x and weights to BF16, FP32 sums): the routed experts' gate / up
//     and down, only where both have cols % 128 == 0 (else the chunk keeps them exact);
//   exact (as the decode step): the HC mixes, the router logits, the indexer's compressor
//     kv / gate, its head weights and index_q_b (they feed top-k choices).
// Rounding is round-to-nearest-even (the tensor cores' inputs see at most this error, or
// twice it where they truncate: OperandRounding::truncate emulates that).
#include <cstdint>
#include <vector>

#include "core/weight.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::deepseek_v4 {

struct Weights;

enum class Operands : uint8_t { kExact, kTf32, kBf16 };

// The weights a tensor-core chunk rounds, by the byte range of their data (a group of o_a is a
// view inside o_a's range).
class OperandRounding {
 public:
  OperandRounding(const Weights& w, bool truncate);
  Operands of(const WeightMatrix& w) const;
  bool truncate = false;

 private:
  void add(const WeightMatrix& w, Operands r);
  struct Range {
    const uint8_t *begin, *end;
    Operands r;
  };
  std::vector<Range> ranges_;
};

// v rounded to TF32 (10-bit mantissa) or BF16 (7-bit), nearest-even or truncated.
float round_operand(float v, Operands r, bool truncate);

// Y {n, w.rows} = X {n, w.cols} W^T, the one place every DeepSeek CPU product goes through:
//   - w among the tensor-core chunk's products (`rounding` set): both operands rounded as the
//     chunk rounds them (weights dequantized first); this diagnostic wins over act_quant;
//   - else `act_quant` (Config::act_quant) and w in Q8_0 / Q2_K / IQ2_XXS: ds4's activation
//     quantization and integer dots (core/act_quant.h matmul_act);
//   - else cpu matmul on f32 x.
// Every path computes each output row on its own, so results do not depend on n.
void product(const OperandRounding* rounding, bool act_quant, const WeightMatrix& w, const float* x, int64_t n,
             float* y, ThreadPool* pool);

}  // namespace ds4::deepseek_v4
