// GpuCanary's probe: one tiny kernel + an event on a private stream, polled with
// cudaEventQuery from the monitor thread (never a blocking sync, so a stall is seen while
// it lasts).
#include <memory>

#include "backend/cuda/canary.h"
#include "backend/cuda/check.h"

namespace ds4::cuda {
namespace {

// Touches one word so the launch is a real kernel that needs an SM, not a no-op the
// driver could skip: its latency is the wait for a free SM slot.
__global__ void canary_kernel(unsigned* counter) {
  if (threadIdx.x == 0) atomicAdd(counter, 1u);
}

class CudaProbe : public CanaryProbe {
 public:
  explicit CudaProbe(int device) : device_(device) {
    if (device_ < 0) DS4_CUDA_CHECK(cudaGetDevice(&device_));
    DS4_CUDA_CHECK(cudaSetDevice(device_));
    int least = 0, greatest = 0;
    DS4_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // Non-blocking: no implicit sync with the legacy default stream the engine may use.
    DS4_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    DS4_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    DS4_CUDA_CHECK(cudaMalloc(&counter_, sizeof(unsigned)));
    DS4_CUDA_CHECK(cudaMemsetAsync(counter_, 0, sizeof(unsigned), stream_));
    DS4_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~CudaProbe() override {
    // Teardown errors are ignored: the process may be exiting after a device fault.
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaFree(counter_);
    cudaEventDestroy(done_);
    cudaStreamDestroy(stream_);
  }
  void launch() override {
    // The monitor thread is not the thread that loaded the model: select the device here.
    DS4_CUDA_CHECK(cudaSetDevice(device_));
    canary_kernel<<<1, 32, 0, stream_>>>(counter_);
    DS4_CUDA_CHECK_LAUNCH();
    DS4_CUDA_CHECK(cudaEventRecord(done_, stream_));
  }
  bool done() override {
    cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) return false;
    DS4_CUDA_CHECK(e);
    return true;
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  unsigned* counter_ = nullptr;
};

}  // namespace

int visible_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return n;
}

GpuCanary::GpuCanary(Options o, int device) : CanaryMonitor(std::make_unique<CudaProbe>(device), std::move(o)) {}

}  // namespace ds4::cuda
