// bench_persist MODEL_DIR [PREFIX_TOKENS] [THREADS]
// Prefills PREFIX_TOKENS, then times: serialize + atomic write (what the engine's writer
// thread does), read + verify + load into a fresh state (a restore), and the prefill it
// replaces. Prints one line per phase with bytes.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "models/model.h"
#include "persist/checkpoint_file.h"

using Clock = std::chrono::steady_clock;
static double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [PREFIX_TOKENS] [THREADS]\n", argv[0]);
    return 2;
  }
  const int n = argc > 2 ? std::stoi(argv[2]) : 512;
  ds4::LoadOptions lo;
  lo.threads = argc > 3 ? std::stoi(argv[3]) : 0;
  auto model = ds4::load_model(argv[1], lo);
  const int64_t V = model->info().vocab_size;
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(int32_t((i * 37 + 11) % V));
  const std::string fp = model->fingerprint();

  auto st = model->new_state();
  auto t0 = Clock::now();
  model->prefill(*st, tokens);
  auto t1 = Clock::now();

  const std::string path = (std::filesystem::temp_directory_path() / "ds4-bench-persist.ckpt").string();
  ds4::Checkpoint ck;
  ck.fingerprint = fp;
  ck.tokens = tokens;
  std::vector<ds4::StateSection> secs;
  st->save(secs);
  for (auto& s : secs) ck.sections.push_back({std::move(s.name), std::move(s.bytes)});
  auto t2 = Clock::now();
  const uint64_t bytes = ds4::write_checkpoint(path, ck);
  auto t3 = Clock::now();
  auto back = ds4::read_checkpoint(path, fp);
  std::vector<ds4::StateSection> in;
  for (auto& s : back.sections) in.push_back({std::move(s.name), std::move(s.bytes)});
  auto restored = model->new_state();
  restored->load(in);
  auto t4 = Clock::now();
  std::filesystem::remove(path);

  std::printf("model %s family %s prefix %d tokens, state %zu bytes, file %llu bytes\n", argv[1],
              model->info().family.c_str(), n, st->bytes(), static_cast<unsigned long long>(bytes));
  std::printf("recompute (prefill)      %10.2f ms\n", ms(t0, t1));
  std::printf("save: serialize          %10.2f ms\n", ms(t1, t2));
  std::printf("save: write+fsync        %10.2f ms\n", ms(t2, t3));
  std::printf("restore: read+crc+load   %10.2f ms\n", ms(t3, t4));
  std::printf("restore / recompute      %10.3f\n", ms(t3, t4) / ms(t0, t1));
  return 0;
}
