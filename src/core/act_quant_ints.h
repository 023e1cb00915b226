#pragma once
// The integer halves of core/act_quant.h's dots: for `nb` consecutive weight blocks of one row
// and the matching quantized activation values, each block's exact integer sum. The f32 half
// (scales, block order) is act_quant.cpp's, shared by every SIMD level; integer sums do not
// depend on the order they are added in, so every level gives the same bits.
#include <cstdint>

#include "core/simd.h"

namespace ds4 {

// blocks: the row's bytes from the first block on; xq: the activation values of that block on.
using ActIntFn = void (*)(const uint8_t* blocks, const int8_t* xq, int64_t nb, int32_t* out);

struct ActIntKernels {
  ActIntFn q8_0;     // per 32-value block: sum w_q * x_q
  ActIntFn q2_k;     // per 256-value super-block: sum over its 16 sub-blocks of (scale & 15) * sum q2 * x_q
  ActIntFn iq2_xxs;  // per 256-value super-block: sum over its 8 groups of (2 * s + 1) * sum signed grid * x_q
};
const ActIntKernels& act_int_kernels(SimdLevel level);

}  // namespace ds4
