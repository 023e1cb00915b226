#pragma once
// Device memory with admission: before any allocation we ask the driver how much is free
// and refuse with a clear error when the request (plus headroom for the CUDA context,
// cuBLAS workspaces and fragmentation) does not fit, instead of a bare
// cudaErrorMemoryAllocation halfway through a model upload.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ds4::cuda {

struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

DeviceMemoryInfo device_memory_info();

inline constexpr size_t kDefaultHeadroom = size_t(512) << 20;

// Throws ds4::Error naming `what`, the bytes asked for, free and total device memory when
// `bytes` + `headroom_bytes` exceed what is free now.
void admit_allocation(size_t bytes, const std::string& what, size_t headroom_bytes = kDefaultHeadroom);

// Bytes past the end of every DeviceBuffer that kernels may read (never write; their values are
// never used): gemv_act's IQ2_XXS lane-table decoder reads a 2-byte-aligned 16-byte unit with two
// aligned 16-byte loads, the second up to 16 bytes past the unit (gemv_act_formats.cuh ActIQ2_XXS4L).
inline constexpr size_t kDeviceReadSlack = 16;

// An owning device allocation (cudaMalloc; never managed memory: see the device notes), with
// kDeviceReadSlack readable bytes past bytes().
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Pinned (page-locked) host memory, cudaMallocHost: a captured CUDA graph copies from and to
// these fixed host addresses on every replay (the models' step inputs and logits).
struct PinnedHost {
  void* p = nullptr;
  explicit PinnedHost(size_t bytes);
  ~PinnedHost();
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
};

}  // namespace ds4::cuda
