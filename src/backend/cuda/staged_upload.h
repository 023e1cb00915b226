#pragma once
// Host-to-device upload through pinned staging (backend/staged_copy.h on CUDA): a few
// cudaMallocHost buffers used round robin, cudaMemcpyAsync on a dedicated non-blocking
// stream, one event per buffer. Copies from pinned memory run at the link's DMA rate and the
// host memcpy of the next buffer overlaps them; a plain cudaMemcpy from the mmap'd file is
// synchronous and stages through the driver's own small bounce buffer instead.
// When cudaMallocHost fails (pinned memory limit, no memory), the same staging runs in
// ordinary host memory with synchronous copies: slower, never fatal, counted and logged.
#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/staged_copy.h"
#include "backend/cuda/memory.h"
#include "core/progress.h"

namespace ds4::cuda {

struct StagingOptions {
  int slots = 4;
  size_t slot_bytes = size_t(64) << 20;
  size_t max_gap = 255;          // padding bridged between pieces (the Uploader's 256-byte alignment)
  bool force_pageable = false;   // the bench's and tests' way to the fallback; env DS4_UPLOAD_PAGEABLE=1 too
  std::string progress = "auto"; // ByteProgress mode: auto, on, off
};

// Upload statistics for a report line and the bench.
struct UploadStats {
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t copies = 0;           // cudaMemcpy(Async) calls
  bool pageable = false;         // pinned staging unavailable: synchronous pageable copies
  size_t staging_bytes = 0;      // host staging allocated (pinned or not)
};

class StagedUpload {
 public:
  // `base`: the device buffer; `total`: bytes that will be put (progress and the final check);
  // `what`: names the upload in the progress lines and the fallback message.
  StagedUpload(uint8_t* base, uint64_t total, const std::string& what, const StagingOptions& opt = {});
  ~StagedUpload();
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;

  // base[dst, dst + bytes) = host[0, bytes); host bytes may be reused once this returns.
  // host == nullptr: a hole (the device bytes there are someone else's: a fill).
  void put(size_t dst, const void* host, size_t bytes) { copier_->put(dst, host, bytes); }
  // Waits for every copy; prints the closing progress line. Call once.
  UploadStats finish();

 private:
  void alloc_staging(const StagingOptions& opt, uint64_t total);

  uint8_t* base_;
  std::string what_;
  size_t slot_bytes_ = 0;
  std::vector<std::unique_ptr<PinnedHost>> pinned_;
  std::vector<std::vector<uint8_t>> pageable_;  // the fallback's staging
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  ByteProgress progress_;
  std::optional<StagedCopier> copier_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  UploadStats stats_;
  bool finished_ = false;
};

}  // namespace ds4::cuda
