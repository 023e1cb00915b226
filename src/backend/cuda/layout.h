#pragma once
// Byte offsets of the buffers a CUDA model packs into one device allocation (its state, its
// step scratch): each buffer starts at a 256-byte boundary. Host-side arithmetic only, shared
// by the models' step_layout.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ds4::cuda {

inline size_t layout_align(size_t v) { return (v + 255) / 256 * 256; }

// Hands out consecutive float buffers. min_floats > 0 gives an empty buffer its own slot (GLM
// keeps distinct offsets for zero-sized parts); 0 lets it share the next buffer's offset.
struct LayoutTaker {
  size_t at = 0;
  int64_t min_floats = 0;
  size_t take(int64_t floats) {
    const size_t off = at;
    at = layout_align(at + size_t(std::max<int64_t>(floats, min_floats)) * 4);
    return off;
  }
  static size_t after(size_t off, int64_t floats) { return off + size_t(floats) * 4; }
};

}  // namespace ds4::cuda
