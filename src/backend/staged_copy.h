#pragma once
// Host-to-device upload through a few staging buffers, without CUDA: the caller hands pieces
// (device offset, host bytes) in order; each is memcpy'd into a staging slot right away (that
// memcpy also takes the mmap's page faults) and a slot's bytes go out through `copy` while
// the host fills the next slot. A slot is written again only after `wait` said its copies are
// done, so with 2-4 slots the host copy of slot s+1 overlaps the DMA of slot s. The CUDA side
// (backend/cuda/staged_upload.h) passes cudaMemcpyAsync + an event per slot; the unit test
// passes fakes that run the "DMA" only at wait time, so an early overwrite shows as bad bytes.
//
// Packing: pieces whose device ranges follow each other (up to `max_gap` bytes of padding in
// between, zero-filled) share one copy. Splitting: a piece larger than what is left of a slot
// continues in the next slot. Once put() returns, the host bytes are no longer needed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ds4 {

// One staging buffer (C++17: the CUDA backend's .cu files include this header).
struct StagingSlot {
  uint8_t* data;
  size_t size;
};

class StagedCopier {
 public:
  struct Hooks {
    // Starts copying `bytes` from `host` (inside staging slot `slot`) to device offset `dst`;
    // must not wait for the copy itself.
    std::function<void(int slot, const uint8_t* host, size_t bytes, size_t dst)> copy;
    // Returns once every copy started from `slot` has read its host bytes.
    std::function<void(int slot)> wait;
    // Bytes accepted so far (staged or skipped) of `total`; optional. Called after every
    // copy started and once more, with done == total, by finish().
    std::function<void(uint64_t done, uint64_t total)> progress;
  };

  // `total`: the bytes the caller will put (progress denominator; finish() checks it).
  StagedCopier(std::vector<StagingSlot> slots, uint64_t total, size_t max_gap, Hooks hooks)
      : slots_(std::move(slots)), pending_(slots_.size(), false), total_(total), max_gap_(max_gap),
        hooks_(std::move(hooks)) {
    DS4_CHECK(!slots_.empty(), "StagedCopier: no staging slots");
    for (const auto& s : slots_) DS4_CHECK(s.data && s.size > 0, "StagedCopier: an empty staging slot");
  }

  // Copies host[0, bytes) to device offset dst. host == nullptr with bytes > 0: nothing is
  // written there (a hole: the device bytes stay as they are) but the bytes count as done.
  void put(size_t dst, const void* host, size_t bytes) {
    if (bytes == 0) return;
    if (!host) {
      close();  // a hole is never bridged: the next piece starts its own copy
      done_ += bytes;
      report();
      return;
    }
    const uint8_t* src = static_cast<const uint8_t*>(host);
    if (open_) {
      const size_t end = seg_dst_ + (fill_ - seg_start_);
      const size_t room = slot().size - fill_;
      if (dst >= end && dst - end <= max_gap_ && dst - end < room) {
        std::memset(slot().data + fill_, 0, dst - end);  // the padding between pieces
        fill_ += dst - end;
      } else {
        close();
      }
    }
    while (bytes > 0) {
      if (fill_ == slot().size) next_slot();
      if (!open_) open_ = true, seg_start_ = fill_, seg_dst_ = dst;
      const size_t n = std::min(bytes, slot().size - fill_);
      std::memcpy(slot().data + fill_, src, n);
      fill_ += n, src += n, dst += n, bytes -= n, done_ += n;
    }
  }

  // Starts the last copy and waits for every slot. Throws when the pieces did not add up to
  // the announced total (the sizing pass and the copy pass disagree: a bug).
  void finish() {
    close();
    for (size_t s = 0; s < slots_.size(); ++s) wait_slot(int(s));
    DS4_CHECK(done_ == total_, "StagedCopier: " + std::to_string(done_) + " bytes put, " + std::to_string(total_) +
                                   " announced");
    if (hooks_.progress) hooks_.progress(done_, total_);
  }

  uint64_t done() const { return done_; }
  uint64_t copies() const { return copies_; }  // copy hooks called

 private:
  StagingSlot& slot() { return slots_[size_t(cur_)]; }

  // Starts the copy of the open segment; the slot's remaining room stays usable (the copy
  // reads only the segment's bytes).
  void close() {
    if (!open_) return;
    open_ = false;
    hooks_.copy(cur_, slot().data + seg_start_, fill_ - seg_start_, seg_dst_);
    pending_[size_t(cur_)] = true;
    ++copies_;
    report();
  }
  void next_slot() {
    close();
    cur_ = (cur_ + 1) % int(slots_.size());
    wait_slot(cur_);  // the slot's last copies must have read it before we write again
    fill_ = 0;
  }
  void wait_slot(int s) {
    if (!pending_[size_t(s)]) return;
    hooks_.wait(s);
    pending_[size_t(s)] = false;
  }
  void report() {
    if (hooks_.progress) hooks_.progress(done_, total_);
  }

  std::vector<StagingSlot> slots_;
  std::vector<bool> pending_;  // copies started from the slot and not yet waited for
  uint64_t total_, done_ = 0, copies_ = 0;
  size_t max_gap_;
  Hooks hooks_;
  int cur_ = 0;          // the slot being filled
  size_t fill_ = 0;      // bytes of it used (copied or copying)
  bool open_ = false;    // a segment [seg_start_, fill_) waits for its copy
  size_t seg_start_ = 0, seg_dst_ = 0;
};

}  // namespace ds4
