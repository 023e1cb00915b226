#pragma once
// A model state's paged host cache (core/paged_rows.h) from its contiguous device rows: the CUDA
// states' checkpoint and swap copies (models/*/cuda/state_io.cu), one implementation. (The way
// up is v.flatten() and one copy.)
#include <cstddef>

#include "core/paged_rows.h"

namespace ds4::cuda {

// v = the n floats at device src as whole rows of v.width() (n is the model's own count: partial
// rows are an internal error naming `who`).
void paged_rows_from_device(const void* src, PagedRows& v, size_t n, const char* who);

}  // namespace ds4::cuda
