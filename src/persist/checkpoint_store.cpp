#include "persist/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "persist/atomic_file.h"
#include "persist/prefix_hash.h"

namespace ds4 {
namespace fs = std::filesystem;

namespace {
constexpr const char* kManifest = "manifest.json";
constexpr int kManifestVersion = 1;

std::string file_name_for(const Checkpoint& c) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%016llx-%llu.ckpt", (unsigned long long)prefix_hash(c.tokens),
                (unsigned long long)c.tokens.size());
  return buf;
}

// Checks at start that `dir` is (or can be made) a directory we can write: otherwise every
// save would fail one by one at runtime, each only a warning, with nothing ever kept.
void check_dir_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::error_code stat_ec;
  if (!fs::is_directory(dir, stat_ec)) {
    const bool exists = fs::exists(dir, stat_ec);
    throw InputError("checkpoint dir " + dir + " cannot be created: " +
                     (exists ? std::string("it exists and is not a directory")
                      : ec   ? ec.message()
                             : "unknown error"));
  }
  const std::string probe = (fs::path(dir) / (".write-probe.tmp." + std::to_string(::getpid()))).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError("checkpoint dir " + dir + " is not writable: " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}
}  // namespace

CheckpointStore::CheckpointStore(CheckpointStoreOptions options) : options_(std::move(options)) {
  check_dir_writable(options_.dir);
  remove_stale_temps(options_.dir);
  {
    std::lock_guard<std::mutex> lock(mu_);
    load_manifest_locked();
  }
  writer_ = std::thread([this] { writer_loop(); });
}

CheckpointStore::~CheckpointStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  writer_.join();
}

void CheckpointStore::save_async(Checkpoint ckpt) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(ckpt));
    while (queue_.size() > std::max<size_t>(1, options_.max_queued)) {
      ++stats_.save_failures;
      problems_.push_back("save dropped: the writer is " + std::to_string(queue_.size()) + " saves behind (" +
                          std::to_string(queue_.front().tokens.size()) + " tokens)");
      queue_.pop_front();
    }
  }
  queue_cv_.notify_one();
}

void CheckpointStore::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void CheckpointStore::writer_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    Checkpoint c = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    save_now(c);
    lock.lock();
    writing_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void CheckpointStore::save_now(const Checkpoint& c) {
  std::string name = file_name_for(c);
  // A checkpoint the budget cannot hold is not written: eviction would first delete every
  // other checkpoint to make room, then this one too, keeping nothing.
  if (const uint64_t need = checkpoint_size(c); need > options_.budget_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.save_failures;
    problems_.push_back("save skipped: the checkpoint needs " + std::to_string(need) +
                        " bytes, more than the whole budget of " + std::to_string(options_.budget_bytes) +
                        " bytes (checkpoint.budget_bytes)");
    return;
  }
  uint64_t bytes = 0;
  try {
    // The directory may have been removed while the server runs: make it again rather than
    // failing every later save until a restart.
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    bytes = write_checkpoint((fs::path(options_.dir) / name).string(), c);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.save_failures;
    problems_.push_back(std::string("save failed: ") + e.what());
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  ++stats_.saves;
  stats_.bytes_written += bytes;
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.file == name; }),
                 entries_.end());
  entries_.push_back({name, c.fingerprint, prefix_hash(c.tokens), c.tokens.size(), bytes, ++use_counter_,
                      c.alias.empty() ? 0 : prefix_hash(c.alias), c.alias.size()});
  evict_locked();
  publish_manifest(lock);
}

uint64_t CheckpointStore::covered(const CheckpointEntry& e, const std::string& fingerprint,
                                  const std::vector<uint64_t>& chain) {
  if (e.fingerprint != fingerprint) return 0;
  const uint64_t len = chain.size() - 1;  // prompt tokens
  uint64_t n = 0;
  if (e.token_count <= len && chain[e.token_count] == e.prefix_hash) n = e.token_count;
  if (e.alias_count > n && e.alias_count <= len && chain[e.alias_count] == e.alias_hash) n = e.alias_count;
  return n;
}

bool CheckpointStore::has_candidate(const std::string& fingerprint, std::span<const int32_t> tokens) const {
  const std::vector<uint64_t> chain = prefix_hash_chain(tokens);
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const auto& e) { return covered(e, fingerprint, chain) > 0; });
}

void CheckpointStore::reject(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.rejected;
  problems_.push_back(reason);
}

std::optional<Checkpoint> CheckpointStore::restore_longest(const std::string& fingerprint,
                                                            std::span<const int32_t> tokens) {
  const std::vector<uint64_t> chain = prefix_hash_chain(tokens);
  auto is_prefix = [&](const std::vector<int32_t>& t) {
    return !t.empty() && t.size() <= tokens.size() && std::equal(t.begin(), t.end(), tokens.begin());
  };
  std::vector<std::string> tried;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::optional<CheckpointEntry> best;
    uint64_t best_n = 0;
    for (const auto& e : entries_) {
      const uint64_t n = covered(e, fingerprint, chain);
      if (n > best_n && std::find(tried.begin(), tried.end(), e.file) == tried.end()) best = e, best_n = n;
    }
    if (!best) return std::nullopt;
    tried.push_back(best->file);
    const std::string path = (fs::path(options_.dir) / best->file).string();
    lock.unlock();
    std::optional<Checkpoint> c;
    std::string error;
    try {
      c = read_checkpoint(path, fingerprint);
      if (!is_prefix(c->tokens) && !is_prefix(c->alias))
        throw CheckpointError("checkpoint " + path + ": stored tokens differ from the prompt (hash collision)");
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.file == best->file; });
    if (!error.empty()) {
      // Gone meanwhile (evicted or replaced by a save): no fault of the file, try the next.
      if (it == entries_.end()) continue;
      ++stats_.rejected;
      drop_locked(best->file, error);
      publish_manifest(lock);
      continue;
    }
    ++stats_.restores;
    stats_.bytes_read += best->bytes;
    if (it != entries_.end()) it->last_used = ++use_counter_;
    publish_manifest(lock);
    return c;
  }
}

void CheckpointStore::drop_locked(const std::string& file, const std::string& reason) {
  std::error_code ec;
  fs::remove(fs::path(options_.dir) / file, ec);
  problems_.push_back(reason);
  std::erase_if(entries_, [&](const auto& e) { return e.file == file; });
}

void CheckpointStore::evict_locked() {
  while (total_bytes_locked() > options_.budget_bytes && !entries_.empty()) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
    std::error_code ec;
    fs::remove(fs::path(options_.dir) / lru->file, ec);
    entries_.erase(lru);
    ++stats_.evictions;
  }
}

void CheckpointStore::load_manifest_locked() {
  std::ifstream in(fs::path(options_.dir) / kManifest);
  try {
    if (!in) throw Error("missing");
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("version").get<int>() != kManifestVersion) throw Error("version");
    entries_.clear();
    for (const auto& e : j.at("entries")) {
      CheckpointEntry c{e.at("file").get<std::string>(), e.at("fingerprint").get<std::string>(),
                        e.at("prefix_hash").get<uint64_t>(), e.at("token_count").get<uint64_t>(),
                        e.at("bytes").get<uint64_t>(), e.at("last_used").get<uint64_t>(),
                        e.value("alias_hash", uint64_t(0)), e.value("alias_count", uint64_t(0))};
      std::error_code ec;
      if (c.file.find('/') != std::string::npos || !fs::is_regular_file(fs::path(options_.dir) / c.file, ec)) continue;
      // The size on disk, not the manifest's copy: a wrong count there would skew the budget.
      c.bytes = fs::file_size(fs::path(options_.dir) / c.file, ec);
      if (ec) continue;
      use_counter_ = std::max(use_counter_, c.last_used);
      entries_.push_back(std::move(c));
    }
  } catch (const std::exception&) {
    rebuild_manifest_locked();
    return;
  }
  add_unlisted_locked();
}

// Checkpoints on disk the manifest does not list: committed (renamed) by a process killed
// before it rewrote the manifest. Without this they were never restored, never counted in
// the budget and never evicted. Their headers are read like a rebuild's; they count as the
// most recently used (they are the newest saves).
void CheckpointStore::add_unlisted_locked() {
  std::error_code ec;
  bool added = false;
  for (const auto& f : fs::directory_iterator(options_.dir, ec)) {
    if (f.path().extension() != ".ckpt") continue;
    const std::string file = f.path().filename().string();
    if (std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.file == file; })) continue;
    try {
      CheckpointHeader h = read_checkpoint_header(f.path().string());
      entries_.push_back({file, h.fingerprint, h.prefix_hash, h.token_count, uint64_t(fs::file_size(f.path())),
                          ++use_counter_, h.alias.empty() ? 0 : prefix_hash(h.alias), h.alias.size()});
      added = true;
    } catch (const std::exception& e) {
      ++stats_.rejected;
      problems_.push_back(e.what());
      std::error_code rm;
      fs::remove(f.path(), rm);
    }
  }
  if (added) write_manifest_locked();
}

void CheckpointStore::rebuild_manifest_locked() {
  entries_.clear();
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(options_.dir, ec)) {
    if (f.path().extension() != ".ckpt") continue;
    try {
      CheckpointHeader h = read_checkpoint_header(f.path().string());
      entries_.push_back({f.path().filename().string(), h.fingerprint, h.prefix_hash, h.token_count,
                          uint64_t(fs::file_size(f.path())), ++use_counter_,
                          h.alias.empty() ? 0 : prefix_hash(h.alias), h.alias.size()});
    } catch (const std::exception& e) {
      ++stats_.rejected;
      problems_.push_back(e.what());
      fs::remove(f.path(), ec);
    }
  }
  write_manifest_locked();
}

void CheckpointStore::write_manifest_locked() {
  std::string error;
  write_manifest_text(manifest_text_locked(), error);
  if (!error.empty()) problems_.push_back(error);
}

// The manifest's fsync must not hold the store's lock (the engine thread takes it to queue a
// save or look up a prompt): snapshot the text under it, write without it. Writes are
// ordered by generation, so an older snapshot never overwrites a newer one.
void CheckpointStore::publish_manifest(std::unique_lock<std::mutex>& lock) {
  std::string text = manifest_text_locked();
  const uint64_t gen = ++manifest_gen_;
  lock.unlock();
  std::string error;
  {
    std::lock_guard<std::mutex> mlock(manifest_mu_);
    if (gen > manifest_written_) {
      write_manifest_text(text, error);
      manifest_written_ = gen;
    }
  }
  lock.lock();
  if (!error.empty()) problems_.push_back(error);
}

void CheckpointStore::write_manifest_text(const std::string& text, std::string& error) const {
  try {
    write_file_atomic((fs::path(options_.dir) / kManifest).string(),
                      [&](FileWriter& w) { w.write(text.data(), text.size()); });
  } catch (const std::exception& e) {
    // The manifest is only a cache of the headers; the next open rebuilds it.
    error = std::string("manifest not written: ") + e.what();
  }
}

std::string CheckpointStore::manifest_text_locked() const {
  nlohmann::json j;
  j["version"] = kManifestVersion;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : entries_)
    j["entries"].push_back({{"file", e.file}, {"fingerprint", e.fingerprint}, {"prefix_hash", e.prefix_hash},
                            {"token_count", e.token_count}, {"bytes", e.bytes}, {"last_used", e.last_used},
                            {"alias_hash", e.alias_hash}, {"alias_count", e.alias_count}});
  return j.dump(1);
}

std::vector<CheckpointEntry> CheckpointStore::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

uint64_t CheckpointStore::total_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_bytes_locked();
}

uint64_t CheckpointStore::total_bytes_locked() const {
  uint64_t t = 0;
  for (const auto& e : entries_) t += e.bytes;
  return t;
}

CheckpointStats CheckpointStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<std::string> CheckpointStore::take_problems() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(problems_, {});
}

}  // namespace ds4
