// The DeepSeek V4 tensor-core prefill ops alone (issue #22), a small binary for the device
// loop: the tensor-core attend vs the exact attend (dsv4_attend_tc_check.h, with `info` timing
// lines of one 512-row Flash chunk at 32K) and the tensor-core indexer vs indexer_select
// (dsv4_indexer_tc_check.h). test_deepseek_v4_cuda runs the same checks (item 9) with the rest
// of the model. Plain executable; exits 1 when any check fails.
#include <cstdio>
#include <exception>

#include "dsv4_attend_tc_check.h"
#include "dsv4_indexer_tc_check.h"
#include "test_common.h"

int main() {
  using namespace ds4::cuda_test;
  try {
    attend_tc_shapes();
    indexer_tc_shapes();
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  return summary();
}
