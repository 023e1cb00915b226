#pragma once
// The bench's progress bar is the shared one (core/progress.h).
#include "core/progress.h"

namespace ds4::bench {
using ds4::Progress;
}  // namespace ds4::bench
