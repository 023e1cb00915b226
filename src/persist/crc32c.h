#pragma once
// CRC-32C (Castagnoli) over byte ranges; used for per-section checksums of checkpoints.
#include <cstddef>
#include <cstdint>

namespace ds4 {
// Continues a running CRC: crc32c(data, n, crc32c(prev, m)) == crc32c(prev ++ data).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
}  // namespace ds4
