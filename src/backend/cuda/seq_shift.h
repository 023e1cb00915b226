#pragma once
// A decode batch's rows as one launch over its sequences (the one-launch form of seq_rows.h's
// loop): row t's state lies at[t * stride] bytes (int64, device memory the model writes per
// batch) from row 0's state, and each row runs exactly its sequence's one-token step. A null
// `at`: the rows are one sequence's consecutive tokens. Device side: seq_rows.cuh.
#include <cstdint>

namespace ds4::cuda {

struct SeqShift {
  const int64_t* at = nullptr;
  int64_t stride = 0;  // int64 values between rows' shifts
};

}  // namespace ds4::cuda
