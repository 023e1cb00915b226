#pragma once
// A directory of checkpoints with a manifest, a byte budget and LRU eviction.
//
// Saves run on a writer thread so a turn's answer is never delayed by the disk; a failed
// save (full disk, I/O error) is counted and reported and the chat goes on. Restores pick
// the longest stored prefix of the new prompt for the same model; a checkpoint that fails
// any check (truncated, corrupted, foreign version, other model) is reported, deleted and
// never loaded. The manifest is a cache of the files' headers: if it is missing or corrupt
// it is rebuilt from them.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "persist/checkpoint_file.h"
#include "persist/checkpoint_stats.h"

namespace ds4 {

struct CheckpointStoreOptions {
  std::string dir;
  uint64_t budget_bytes = uint64_t(4) << 30;
  // Saves waiting for the writer. Each holds a full state copy, so a disk slower than the
  // chats must not grow memory without bound: past this, the oldest waiting save is dropped
  // (counted as a save failure; a later turn of the same chat supersedes it anyway).
  size_t max_queued = 8;
};

struct CheckpointEntry {
  std::string file;  // name inside dir
  std::string fingerprint;
  uint64_t prefix_hash = 0;
  uint64_t token_count = 0;
  uint64_t bytes = 0;
  uint64_t last_used = 0;  // store-wide use counter (bigger = more recent)
  uint64_t alias_hash = 0, alias_count = 0;  // second key (Checkpoint::alias); count 0 = none
};

class CheckpointStore {
 public:
  explicit CheckpointStore(CheckpointStoreOptions options);
  ~CheckpointStore();  // finishes queued saves
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  void save_async(Checkpoint ckpt);
  void flush();  // blocks until every queued save has finished (or failed)

  // The checkpoint for `fingerprint` whose tokens or alias are the longest prefix of `tokens`
  // (may be all of it), validated. The file is read without holding the store's lock, so
  // saves and stats never wait for a large read. Thread-safe.
  std::optional<Checkpoint> restore_longest(const std::string& fingerprint, std::span<const int32_t> tokens);

  // Whether some stored key (tokens or alias) is a prefix of `tokens` by hash (no file read).
  bool has_candidate(const std::string& fingerprint, std::span<const int32_t> tokens) const;
  // A checkpoint the caller could not use after all (its state did not load): counted as rejected.
  void reject(const std::string& reason);

  std::vector<CheckpointEntry> entries() const;
  uint64_t total_bytes() const;
  CheckpointStats stats() const;
  // Faults seen since the last call (one line each: file and reason).
  std::vector<std::string> take_problems();

 private:
  // Prompt tokens the entry's keys cover given the prompt's hash chain (0 = none).
  static uint64_t covered(const CheckpointEntry& e, const std::string& fingerprint, const std::vector<uint64_t>& chain);
  void writer_loop();
  void save_now(const Checkpoint& ckpt);
  void load_manifest_locked();
  void rebuild_manifest_locked();
  void add_unlisted_locked();
  void write_manifest_locked();  // constructor only: nothing else runs yet
  void publish_manifest(std::unique_lock<std::mutex>& lock);
  std::string manifest_text_locked() const;
  void write_manifest_text(const std::string& text, std::string& error) const;
  void evict_locked();
  uint64_t total_bytes_locked() const;
  void drop_locked(const std::string& file, const std::string& reason);

  CheckpointStoreOptions options_;
  mutable std::mutex mu_;
  std::condition_variable queue_cv_, idle_cv_;
  std::deque<Checkpoint> queue_;
  bool writing_ = false, stop_ = false;
  std::vector<CheckpointEntry> entries_;
  std::vector<std::string> problems_;
  CheckpointStats stats_;
  uint64_t use_counter_ = 0;
  std::mutex manifest_mu_;  // orders manifest writes (taken without mu_)
  uint64_t manifest_gen_ = 0, manifest_written_ = 0;
  std::thread writer_;
};

}  // namespace ds4
