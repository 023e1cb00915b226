// Pinned staged upload (see staged_upload.h).
#include "backend/cuda/staged_upload.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/check.h"

namespace ds4::cuda {

StagedUpload::StagedUpload(uint8_t* base, uint64_t total, const std::string& what, const StagingOptions& opt)
    : base_(base), what_(what), progress_(what, opt.progress) {
  DS4_CHECK(opt.slots >= 1 && opt.slot_bytes > 0, "staged upload: no staging slots");
  alloc_staging(opt, total);
  std::vector<StagingSlot> slots;
  for (auto& p : pinned_) slots.push_back({static_cast<uint8_t*>(p->p), slot_bytes_});
  for (auto& v : pageable_) slots.push_back({v.data(), v.size()});
  StagedCopier::Hooks h;
  if (!stats_.pageable) {
    DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    events_.resize(slots.size(), nullptr);
    for (auto& e : events_) DS4_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    h.copy = [this](int s, const uint8_t* host, size_t bytes, size_t dst) {
      DS4_CUDA_CHECK(cudaMemcpyAsync(base_ + dst, host, bytes, cudaMemcpyHostToDevice, stream_));
      // Re-recorded after every copy from the slot: waiting for the last covers them all
      // (one stream, in order).
      DS4_CUDA_CHECK(cudaEventRecord(events_[size_t(s)], stream_));
    };
    h.wait = [this](int s) { DS4_CUDA_CHECK(cudaEventSynchronize(events_[size_t(s)])); };
  } else {
    // cudaMemcpy from pageable memory returns once the source is consumed: nothing to wait for.
    h.copy = [this](int, const uint8_t* host, size_t bytes, size_t dst) {
      DS4_CUDA_CHECK(cudaMemcpy(base_ + dst, host, bytes, cudaMemcpyHostToDevice));
    };
    h.wait = [](int) {};
  }
  h.progress = [this](uint64_t done, uint64_t all) {
    progress_.update(done, all, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  };
  copier_.emplace(std::move(slots), total, opt.max_gap, std::move(h));
  stats_.bytes = total;
}

void StagedUpload::alloc_staging(const StagingOptions& opt, uint64_t total) {
  // A small upload (a test model) gets staging of its own size, not slots x 64 MiB.
  const size_t want = size_t(std::max<uint64_t>(total, 1) + size_t(opt.slots) - 1) / size_t(opt.slots);
  const size_t slot = slot_bytes_ = std::min(opt.slot_bytes, (std::max<size_t>(want, 4096) + 4095) / 4096 * 4096);
  const char* env = std::getenv("DS4_UPLOAD_PAGEABLE");
  std::string why = opt.force_pageable || (env && std::string(env) == "1") ? "forced (DS4_UPLOAD_PAGEABLE / option)" : "";
  for (int s = 0; s < opt.slots && why.empty(); ++s) {
    try {
      pinned_.push_back(std::make_unique<PinnedHost>(slot));
    } catch (const Error& e) {  // not sticky: the context stays usable
      why = e.what();
      pinned_.clear();
      (void)cudaGetLastError();
    }
  }
  if (why.empty()) {
    stats_.staging_bytes = slot * pinned_.size();
    return;
  }
  stats_.pageable = true;
  pageable_.assign(size_t(opt.slots), std::vector<uint8_t>(slot));
  stats_.staging_bytes = slot * pageable_.size();
  std::fprintf(stderr, "%s: pinned staging (%d x %zu MiB) unavailable, using synchronous pageable copies: %s\n",
               what_.c_str(), opt.slots, slot >> 20, why.c_str());
}

UploadStats StagedUpload::finish() {
  DS4_CHECK(!finished_, "staged upload: finish() called twice");
  finished_ = true;
  copier_->finish();
  if (stream_) DS4_CUDA_CHECK(cudaStreamSynchronize(stream_));
  stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  stats_.copies = copier_->copies();
  progress_.finish(stats_.bytes, stats_.seconds,
                   stats_.pageable ? std::to_string(stats_.copies) + " pageable copies (no pinned staging)" : "");
  return stats_;
}

StagedUpload::~StagedUpload() {
  // No throw from a destructor. After an exception mid-upload, copies may still read the
  // staging: let them land before the pinned buffers are freed.
  if (stream_) {
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }
}

}  // namespace ds4::cuda
