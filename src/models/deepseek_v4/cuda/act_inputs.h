#pragma once
// Internal to the CUDA DeepSeek V4 model: the inputs of its weight products with ds4's
// activation quantization (Config::act_quant, core/act_quant.h, backend/cuda/gemv_act.h).
// With it on, every Q8_0 / Q2_K / IQ2_XXS product of the exact paths (decode step, chunks of
// up to tensor_core_rows - 1 rows, exact prefill chunks, decode_batch, verify, the draft
// heads) reads its input quantized: Q8_0 blocks for Q8_0 weights, Q8_K for Q2_K / IQ2_XXS.
// An input is quantized once, into a slot of the step's (or the chunk's) scratch arena, and
// every product of that input reads the copy (attn_in's stacked q_a | kv, q_b and index_q_b of
// one qr, ...). Other formats (F16 / F32 / BF16: the HC mixes, router, compressor and indexer
// projections of ds4 files) keep f32 x, as the CPU model does.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/gemv_act.h"
#include "backend/cuda/layout.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4::cuda {

// The inputs that have a slot (each slot is written by one stream at a time: its products'):
//   kActCol      {hidden}: the normed block input (attn_in, moe_in, experts gate | up), and,
//                later on the main stream, hout (lm_head), the MTP head's normed embedding
//                (e_proj) and DSpark's main_q (ring_kv);
//   kActQr       {q_lora}: q_b, index_q_b;
//   kActHeads    {heads * head_dim}: o_a, group g reading values [g * in, (g + 1) * in);
//   kActLow      {o_groups * o_lora}: o_b;
//   kActShared   {expert_ff}: the shared expert's down projection (the side stream);
//   kActExperts  {experts_used rows of expert_ff}: the routed experts' down projection;
//   kActStreams  {hc * hidden}: the MTP head's normed HC streams (h_proj, per stream);
//   kActTaps     {taps * hidden}: DSpark's tap means (main_proj);
//   kActMarkov   {markov rank}: DSpark's Markov row (markov_w2; the K5 pass only, step arena).
enum ActKind : int { kActCol, kActQr, kActHeads, kActLow, kActShared, kActExperts, kActStreams, kActTaps, kActMarkov,
                     kActKinds };

// Byte offsets of the slots in an arena for `tokens` tokens (a decode step: 1; a chunk: its
// rows). A slot of T values holds them as Q8_0 or Q8_K rows: q {T} int8, then d (Q8_0: T / 32
// floats = T / 8 bytes, Q8_K fewer), then bsums (Q8_K: T / 16 int16 = T / 8 bytes), each part
// 256-byte aligned.
struct ActLayout {
  size_t slot[kActKinds] = {};
  int64_t capacity[kActKinds] = {};  // values the slot holds (tokens x values per token)
  size_t end = 0;                    // the arena's end (offset past the last slot)
};

inline int64_t act_values_per_token(const Config& c, ActKind k, bool mtp, int64_t taps, int64_t markov_rank) {
  switch (k) {
    case kActCol: return c.hidden;
    case kActQr: return c.q_lora;
    case kActHeads: return c.heads * c.head_dim;
    case kActLow: return c.o_groups * c.o_lora;
    case kActShared: return c.expert_ff;
    case kActExperts: return c.experts_used * c.expert_ff;
    case kActStreams: return mtp ? c.hc * c.hidden : 0;
    case kActTaps: return taps * c.hidden;
    case kActMarkov: return markov_rank;
    default: return 0;
  }
}

inline size_t act_part_bytes(int64_t values) { return ::ds4::cuda::layout_align(size_t(values + 7) / 8); }

// Slots from byte offset `at` on; taps / markov_rank are DSpark's (0 without it; the chunk
// arena has no Markov slot), mtp the MTP head's streams.
inline ActLayout act_layout(const Config& c, int64_t tokens, size_t at, bool mtp, int64_t taps, int64_t markov_rank) {
  ActLayout a;
  at = ::ds4::cuda::layout_align(at);
  for (int k = 0; k < kActKinds; ++k) {
    const int64_t per = act_values_per_token(c, ActKind(k), mtp, taps, markov_rank);
    a.capacity[k] = tokens * per;
    a.slot[k] = at;
    if (per > 0) at += ::ds4::cuda::layout_align(size_t(a.capacity[k])) + 2 * act_part_bytes(a.capacity[k]);
  }
  a.end = at;
  return a;
}

// `rows` rows of n values in a slot of `capacity` values as block type b (the slot's parts at
// fixed offsets whatever the rows, so a quantization and its products agree).
inline ::ds4::cuda::DeviceActQ8 act_slot_rows(uint8_t* slot, int64_t capacity, int64_t rows, int64_t n, ActBlock b) {
  ::ds4::cuda::DeviceActQ8 q;
  q.q = reinterpret_cast<int8_t*>(slot);
  uint8_t* d = slot + ::ds4::cuda::layout_align(size_t(capacity));
  q.d = reinterpret_cast<float*>(d);
  q.bsums = b == ActBlock::kQ8_K ? reinterpret_cast<int16_t*>(d + act_part_bytes(capacity)) : nullptr;
  q.n = n, q.rows = rows, q.block = b;
  return q;
}

// One f32 input of products: `rows` rows of n values, x_row floats apart. With a slot
// (act_quant on, outside tensor-core chunks) its quantized copy is made by the first product
// whose weight format takes it (Impl::act_for), on that product's stream, and made again when a
// later product needs the other block type (the slot holds one at a time). A slot is reused by
// later inputs of its kind, so an input's products are enqueued on one stream, before the next
// input of the kind is made (every call site below keeps that: each input is local to one
// function).
struct ActIn {
  const float* x = nullptr;
  int64_t x_row = 0, rows = 1, n = 0;
  uint8_t* slot = nullptr;  // null: every product reads x in f32
  int64_t capacity = 0;
  ActBlock have = ActBlock::kNone;
};

}  // namespace ds4::deepseek_v4::cuda
