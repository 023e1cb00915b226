#pragma once
// The gated delta rule, one decode token: the recurrent core of Gated DeltaNet (Qwen3.8
// Flash Next, per-head scalar decay) and of Kimi Delta Attention (GLM 5.x, per-key-channel
// decay). Per value head h with state S {k_dim, v_dim} (row i belongs to key channel i):
//   S[i, :] *= exp(g[i]);  delta = beta (v - S^T k);  S += k delta^T;  o = S^T q.
// CPU counterparts: qwen_next/gdn.cpp and glm5/kda.cpp (delta_rule_head).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/seq_shift.h"

namespace ds4::cuda {

struct DeltaRuleShape {
  int64_t k_heads = 0, v_heads = 0;  // v_heads a multiple of k_heads (value head h reads key head h / ratio)
  int64_t k_dim = 0, v_dim = 0;
  bool per_channel_gate = false;     // g {v_heads, k_dim} (KDA) instead of {v_heads} (GDN)
};

// qkv {q: k_heads*k_dim | k: k_heads*k_dim | v: v_heads*v_dim}: l2-normalizes every q and
// k head in place (eps 1e-6 on the sum of squares, as FLA) and scales q by 1/sqrt(k_dim).
void delta_rule_qk_l2norm(float* qkv, const DeltaRuleShape& sh, cudaStream_t stream);

// One token through every value head. qkv as above (normalized), g: log decay (<= 0),
// beta {v_heads}, S {v_heads, k_dim, v_dim} updated in place, o {v_heads, v_dim}.
void delta_rule_step(const float* qkv, const float* g, const float* beta, float* S, float* o,
                     const DeltaRuleShape& sh, cudaStream_t stream);

// The two above over `count` consecutive tokens in one launch each (prefill chunk, speculative
// verify): token t's qkv, g, beta and o lie t * stride floats after token 0's. The recurrence
// loops the tokens inside the kernel in order (each thread keeps its column of S), so every
// token equals the single step's arithmetic bit for bit.
// states (optional, delta_rule_rows only): S after each token t is also written to
// states + t * state_stride floats (same {v_heads, k_dim, v_dim} layout): the per-row records
// of a speculative verify that a recurrent state cannot cut back (the Qwen GDN and GLM KDA
// captured-prefix commits). Arithmetic unchanged.
// seq (delta_rule_rows, a decode batch): the tokens are one of each of `count` sequences
// instead, token t on the S seq.at[t] bytes from `S` (seq_shift.h): each its sequence's single
// step, all in one launch (grid.y = token); no states records then (a batch never captures).
struct DeltaRuleRows {
  int64_t count = 1, stride = 0;
  float* states = nullptr;
  int64_t state_stride = 0;
  SeqShift seq;
};
void delta_rule_qk_l2norm_rows(float* qkv, const DeltaRuleShape& sh, const DeltaRuleRows& rows, cudaStream_t stream);
void delta_rule_rows(const float* qkv, const float* g, const float* beta, float* S, float* o, const DeltaRuleShape& sh,
                     const DeltaRuleRows& rows, cudaStream_t stream);

}  // namespace ds4::cuda
