#pragma once
// Internal to the CUDA Qwen model, synthetic full-size mode (CudaModelOptions::synthetic_seed,
// models/qwen_next/synthetic_full.h): a PLE table whose rows are generated per lookup from
// the seed (backend/cuda/synthetic_fill.h synthetic_row), so the 320M-row table needs no
// memory at all; it stands in for the SSD sidecar.
#include <cstdint>
#include <memory>

#include "models/qwen_next/ple_table.h"

namespace ds4::qwen_next::cuda {

std::unique_ptr<PleTable> synthetic_ple_table(int64_t rows, int64_t cols, uint64_t seed);

}  // namespace ds4::qwen_next::cuda
