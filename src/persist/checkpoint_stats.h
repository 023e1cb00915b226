#pragma once
// Counters of a checkpoint store (exported on /metrics as ds4_checkpoint_*); its own header
// so the engine's metrics struct does not pull in the store.
#include <cstdint>

namespace ds4 {

struct CheckpointStats {
  uint64_t saves = 0, save_failures = 0, restores = 0, rejected = 0, evictions = 0;
  uint64_t bytes_written = 0, bytes_read = 0;
};

}  // namespace ds4
