// Device memory admission and the owning buffer.
#include "backend/cuda/memory.h"

#include <cstdio>
#include <utility>

#include "backend/cuda/check.h"

namespace ds4::cuda {

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
              ") in " + what + " at " + file + ":" + std::to_string(line));
}

DeviceMemoryInfo device_memory_info() {
  DeviceMemoryInfo info;
  DS4_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

static std::string mib(size_t b) { return std::to_string(b >> 20) + " MiB"; }

void admit_allocation(size_t bytes, const std::string& what, size_t headroom_bytes) {
  DeviceMemoryInfo info = device_memory_info();
  if (bytes + headroom_bytes > info.free_bytes) {
    throw Error("not enough GPU memory for " + what + ": needs " + mib(bytes) + " (+" +
                mib(headroom_bytes) + " headroom), free " + mib(info.free_bytes) + " of " +
                mib(info.total_bytes) + "; use a smaller model or context");
  }
}

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  admit_allocation(bytes + kDeviceReadSlack, what);
  DS4_CUDA_CHECK(cudaMalloc(&ptr_, bytes + kDeviceReadSlack));
}

DeviceBuffer::~DeviceBuffer() {
  // No throw from a destructor: a failing free here means the context is already broken,
  // and the error has been (or will be) reported by the call that broke it.
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedHost::PinnedHost(size_t bytes) { DS4_CUDA_CHECK(cudaMallocHost(&p, bytes)); }

PinnedHost::~PinnedHost() {
  if (p) cudaFreeHost(p);
}

}  // namespace ds4::cuda
