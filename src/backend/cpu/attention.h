#pragma once
// Dense causal softmax attention with grouped KV heads (GQA), f32, optional per-query key
// selection (sparse attention: only the listed keys take part, causality still applies).
#include <cstdint>

#include "core/paged_rows.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::cpu {

struct AttentionArgs {
  const float* q = nullptr;  // {n_q, heads, head_dim}
  int64_t n_q = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  const float* k = nullptr;  // {n_kv, kv_heads, head_dim}, row stride k_row (floats)
  const float* v = nullptr;  // {n_kv, kv_heads, v_dim},   row stride v_row (floats)
  int64_t n_kv = 0;
  int64_t kv_heads = 0;
  int64_t v_dim = 0;         // 0 = head_dim
  int64_t k_row = 0;         // 0 = kv_heads * head_dim
  int64_t v_row = 0;         // 0 = kv_heads * v_dim
  // Paged caches (core/paged_rows.h) instead of k / v: key j is k_pages->row(j), whose
  // width is the row stride.
  const PagedRows* k_pages = nullptr;
  const PagedRows* v_pages = nullptr;
  int64_t q_pos0 = 0;        // key index of query 0: query i sees keys j <= q_pos0 + i
  float scale = 1.0f;
  // Optional selection: query i attends only to keys sel[i * sel_stride + 0 .. sel_count[i]).
  const int32_t* sel = nullptr;
  const int32_t* sel_count = nullptr;
  int64_t sel_stride = 0;
  float* out = nullptr;      // {n_q, heads, v_dim}
  ThreadPool* pool = nullptr;
};

// Query head h reads KV head h / (heads / kv_heads) (HF repeat_kv order).
void attention_f32(const AttentionArgs& a);

}  // namespace ds4::cpu
