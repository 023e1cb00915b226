#pragma once
// The GPU canary (SPEC §6): a one-warp kernel on its own non-blocking stream (the highest
// priority the device offers) every 100 ms while the engine runs; its launch-to-completion
// latency shows whether other GPU work (a long prefill slice) starves everything else.
// The statistics, the bounded ring and the 2 s stall rule are core/canary_monitor.h; this
// file only supplies the device probe.
#include "core/canary_monitor.h"

namespace ds4::cuda {

// cudaGetDeviceCount, 0 when the runtime finds no device or no driver (never throws):
// `backend: auto` asks this before choosing cuda.
int visible_device_count() noexcept;

// start() / stop() / snapshot(mark) as CanaryMonitor. Throws ds4::Error when the device,
// stream or event cannot be created.
class GpuCanary : public CanaryMonitor {
 public:
  explicit GpuCanary(Options o = {}, int device = -1);  // -1: the current device
};

}  // namespace ds4::cuda
