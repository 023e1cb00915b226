// bench_persist MODEL_DIR [PREFIXES=512] [THREADS=0] [REPEATS=3]
// For each prefix length (comma list) prefills that many tokens, then times, split by the
// thread that pays it in the server:
//   engine thread: serialize (state->save, a memory copy) and install (new_state + load);
//   writer thread: atomic write (temp + fsync + rename + dir fsync);
//   reader thread: read + verify (all CRCs, tokens), warm (page cache) and cold (the file's
//   pages dropped with posix_fadvise after the fsync, so the read comes from the disk);
// and the prefill a restore replaces. Medians over REPEATS. Also checks that the restored
// state's next-token logits equal the original's bit for bit.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include "models/model.h"
#include "persist/checkpoint_file.h"

using Clock = std::chrono::steady_clock;
namespace {
double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void drop_page_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct Times {
  std::vector<double> prefill, serialize, write, read_warm, read_cold, install, decode;
};

void run_once(ds4::Model& model, const std::vector<int32_t>& tokens, const std::string& path, Times& t,
              uint64_t& file_bytes, size_t& state_bytes, bool& same_logits) {
  const int64_t V = model.info().vocab_size;
  auto st = model.new_state();
  auto t0 = Clock::now();
  model.prefill(*st, tokens);  // chunked, as the engine prefills
  auto t1 = Clock::now();
  ds4::Checkpoint ck;
  ck.fingerprint = model.fingerprint();
  ck.tokens = tokens;
  std::vector<ds4::StateSection> secs;
  st->save(secs);
  for (auto& s : secs) ck.sections.push_back({std::move(s.name), std::move(s.bytes)});
  auto t2 = Clock::now();
  file_bytes = ds4::write_checkpoint(path, ck);
  auto t3 = Clock::now();
  drop_page_cache(path);
  auto t4 = Clock::now();
  ds4::read_checkpoint(path, ck.fingerprint);  // cold
  auto t5 = Clock::now();
  auto back = ds4::read_checkpoint(path, ck.fingerprint);  // warm
  auto t6 = Clock::now();
  std::vector<ds4::StateSection> in;
  for (auto& s : back.sections) in.push_back({std::move(s.name), std::move(s.bytes)});
  auto restored = model.new_state();
  restored->load(in);
  auto t7 = Clock::now();
  t.prefill.push_back(ms(t0, t1));
  t.serialize.push_back(ms(t1, t2));
  t.write.push_back(ms(t2, t3));
  t.read_cold.push_back(ms(t4, t5));
  t.read_warm.push_back(ms(t5, t6));
  t.install.push_back(ms(t6, t7));
  state_bytes = st->bytes();
  // One more token on both states: a restore must continue bit-identically.
  const int32_t next = int32_t((tokens.size() * 37 + 11) % size_t(V));
  std::vector<float> a, b;
  model.forward(*st, std::span<const int32_t>(&next, 1), ds4::Logits::kLast, a);
  auto t8 = Clock::now();
  model.forward(*restored, std::span<const int32_t>(&next, 1), ds4::Logits::kLast, b);
  t.decode.push_back(ms(t8, Clock::now()));  // one decode step at this context: the engine's unit of latency
  same_logits = same_logits && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [PREFIXES=512] [THREADS=0] [REPEATS=3]\n", argv[0]);
    return 2;
  }
  std::vector<int> prefixes;
  {
    std::stringstream ss(argc > 2 ? argv[2] : "512");
    for (std::string p; std::getline(ss, p, ',');) prefixes.push_back(std::stoi(p));
  }
  ds4::LoadOptions lo;
  lo.threads = argc > 3 ? std::stoi(argv[3]) : 0;
  const int repeats = argc > 4 ? std::max(1, std::stoi(argv[4])) : 3;
  auto model = ds4::load_model(argv[1], lo);
  const int64_t V = model->info().vocab_size;
  const std::string path = (std::filesystem::current_path() / "ds4-bench-persist.ckpt").string();
  std::printf("model %s (family %s), %d repeats, medians in ms; file on %s\n", argv[1],
              model->info().family.c_str(), repeats, std::filesystem::current_path().c_str());
  std::printf("%7s %10s %10s | %9s %9s | %9s | %9s %9s | %9s %7s | %8s %8s %s\n", "prefix", "state_B", "file_B",
              "serialize", "install", "write", "read_warm", "read_cold", "recompute", "decode1", "eng/rec",
              "all/rec", "logits");
  for (int n : prefixes) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < n; ++i) tokens.push_back(int32_t((i * 37 + 11) % V));
    Times t;
    uint64_t file_bytes = 0;
    size_t state_bytes = 0;
    bool same = true;
    for (int r = 0; r < repeats; ++r) run_once(*model, tokens, path, t, file_bytes, state_bytes, same);
    std::filesystem::remove(path);
    const double eng = median(t.serialize) + median(t.install);  // engine thread, save + restore
    const double all = median(t.install) + median(t.read_cold);  // a cold restore, end to end
    std::printf("%7d %10zu %10llu | %9.3f %9.3f | %9.2f | %9.2f %9.2f | %9.2f %7.2f | %8.4f %8.4f %s\n", n,
                state_bytes, static_cast<unsigned long long>(file_bytes), median(t.serialize), median(t.install),
                median(t.write), median(t.read_warm), median(t.read_cold), median(t.prefill), median(t.decode),
                eng / median(t.prefill),
                all / median(t.prefill), same ? "identical" : "DIFFER");
  }
  return 0;
}
