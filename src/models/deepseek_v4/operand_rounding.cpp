// The CUDA tensor-core chunk's operand rounding on the CPU (operand_rounding.h).
#include "models/deepseek_v4/operand_rounding.h"

#include <cstring>

#include "core/act_quant.h"
#include "models/deepseek_v4/weights.h"

namespace ds4::deepseek_v4 {

OperandRounding::OperandRounding(const Weights& w, bool trunc) : truncate(trunc) {
  for (const LayerWeights& L : w.layers) {
    for (const WeightMatrix* m : {&L.q_a, &L.kv, &L.q_b, &L.o_a, &L.o_b, &L.sh_gate, &L.sh_up, &L.sh_down})
      add(*m, Operands::kTf32);
    if (L.has_compressor) add(L.comp.kv, Operands::kTf32), add(L.comp.gate, Operands::kTf32);
    // grouped_mma_bf16 takes K tiles of 128 columns: gate|up (cols = hidden) and down (cols = ff)
    const bool mma = !L.exp_gate.empty() && L.exp_gate[0].cols % 128 == 0 && L.exp_down[0].cols % 128 == 0;
    for (size_t e = 0; mma && e < L.exp_gate.size(); ++e)
      add(L.exp_gate[e], Operands::kBf16), add(L.exp_up[e], Operands::kBf16), add(L.exp_down[e], Operands::kBf16);
  }
  add(w.lm_head, Operands::kTf32);
}

void OperandRounding::add(const WeightMatrix& w, Operands r) {
  if (!w.data || w.rows < 1) return;
  const auto* b = static_cast<const uint8_t*>(w.data);
  ranges_.push_back({b, b + w.rows * w.row_stride_bytes(), r});
}

Operands OperandRounding::of(const WeightMatrix& w) const {
  const auto* p = static_cast<const uint8_t*>(w.data);
  for (const Range& r : ranges_)
    if (p >= r.begin && p < r.end) return r.r;
  return Operands::kExact;
}

float round_operand(float v, Operands r, bool truncate) {
  if (r == Operands::kExact) return v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return v;  // inf / NaN as they are
  const int drop = r == Operands::kTf32 ? 13 : 16;  // mantissa bits beyond TF32's 10 / BF16's 7
  const uint32_t low = (1u << drop) - 1;
  if (!truncate) u += (low >> 1) + ((u >> drop) & 1);  // nearest, ties to even
  u &= ~low;
  std::memcpy(&v, &u, 4);
  return v;
}

void product(const OperandRounding* rounding, bool act_quant, const WeightMatrix& w, const float* x, int64_t n,
             float* y, ThreadPool* pool) {
  const Operands r = rounding ? rounding->of(w) : Operands::kExact;
  if (r == Operands::kExact && act_quant && act_block_for(w.type) != ActBlock::kNone)
    return matmul_act(w, x, n, y, pool);
  if (r == Operands::kExact || n < 1) return matmul(w, x, n, y, pool);
  const bool t = rounding->truncate;
  std::vector<float> wr(size_t(w.rows * w.cols)), xr(size_t(n * w.cols));
  for (int64_t i = 0; i < w.rows; ++i) dequantize_row(w, i, wr.data() + i * w.cols);
  for (float& v : wr) v = round_operand(v, r, t);
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = round_operand(x[i], r, t);
  WeightMatrix f;
  f.type = DType::F32, f.rows = w.rows, f.cols = w.cols, f.data = wr.data();
  matmul(f, xr.data(), n, y, pool);
}

}  // namespace ds4::deepseek_v4
