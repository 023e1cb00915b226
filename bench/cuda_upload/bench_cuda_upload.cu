// Host-to-device upload bandwidth, three paths over the same synthetic "model" (one host
// buffer cut into pieces like a weight file: many small vectors, some large matrices, each
// at a 256-byte aligned device offset), in one run:
//   plain   per-piece synchronous cudaMemcpy from pageable memory (the old upload path)
//   staged  StagedUpload (backend/cuda/staged_upload.h): pinned slots, async copies; also
//           its pageable fallback and a slots x slot-size sweep
//   pinned  cudaMemcpyAsync from one pinned buffer (the link's ceiling: what staged chases)
// Every staged result is read back and compared with the host bytes (exit 1 on a mismatch).
// Usage: bench_cuda_upload [GB=6] [iters=3] [--file PATH: upload that file's mmap instead]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/staged_upload.h"
#include "core/mapped_file.h"

namespace dc = ds4::cuda;
using Clock = std::chrono::steady_clock;

namespace {

struct Piece {
  size_t src, dst, bytes;
};

// 70% small pieces (norms, biases: 4 B - 64 KiB), 30% large (matrices: 1 - 64 MiB), until
// `total` bytes; device offsets aligned to 256 as the Uploader lays them out.
std::vector<Piece> pieces_for(size_t total, size_t& dev_bytes) {
  std::mt19937_64 rng(42);
  std::vector<Piece> ps;
  size_t src = 0, dst = 0;
  while (src < total) {
    size_t n = rng() % 10 < 7 ? 4 + rng() % (64 << 10) : (size_t(1) << 20) + rng() % (size_t(63) << 20);
    n = std::min(n, total - src);
    ps.push_back({src, dst, n});
    src += n;
    dst = (dst + n + 255) / 256 * 256;
  }
  dev_bytes = dst;
  return ps;
}

double secs(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string path;
  double gbps;
  uint64_t copies;
};

}  // namespace

int main(int argc, char** argv) {
  double gb = 6;
  int iters = 3;
  std::string file;
  for (int i = 1, pos = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--file" && i + 1 < argc) file = argv[++i];
    else if (pos++ == 0) gb = std::atof(argv[i]);
    else iters = std::max(1, std::atoi(argv[i]));
  }
  try {
    std::shared_ptr<const ds4::MappedFile> mapped;
    std::vector<uint8_t> owned;
    const uint8_t* host = nullptr;
    size_t total = 0;
    if (!file.empty()) {
      mapped = ds4::MappedFile::open(file);
      host = mapped->data(), total = mapped->size();
    } else {
      total = size_t(gb * 1e9);
      owned.resize(total);  // written once: pages resident, as a model in the page cache
      std::mt19937_64 rng(7);
      for (size_t i = 0; i + 8 <= total; i += 8) {
        const uint64_t x = rng();
        std::memcpy(owned.data() + i, &x, 8);
      }
      host = owned.data();
    }
    size_t dev_bytes = 0;
    const std::vector<Piece> ps = pieces_for(total, dev_bytes);
    dc::DeviceBuffer dev(dev_bytes, "upload bench device buffer");
    uint8_t* d = dev.as<uint8_t>();
    std::printf("upload bench: %.2f GB host (%s), %zu pieces, device %.2f GB, %d iters (median)\n", total / 1e9,
                file.empty() ? "anonymous, resident" : file.c_str(), ps.size(), dev_bytes / 1e9, iters);

    std::vector<Row> rows;
    int bad = 0;
    auto verify = [&](const char* what) {
      // Device -> pinned chunk -> compare: every byte of every piece.
      dc::PinnedHost back(size_t(64) << 20);
      for (const Piece& p : ps)
        for (size_t at = 0; at < p.bytes; at += size_t(64) << 20) {
          const size_t n = std::min(size_t(64) << 20, p.bytes - at);
          DS4_CUDA_CHECK(cudaMemcpy(back.p, d + p.dst + at, n, cudaMemcpyDeviceToHost));
          if (std::memcmp(back.p, host + p.src + at, n) != 0) {
            std::printf("MISMATCH after %s: piece at device %zu (+%zu, %zu bytes)\n", what, p.dst, at, n);
            ++bad;
            return;
          }
        }
    };

    {  // plain: one synchronous pageable cudaMemcpy per piece
      std::vector<double> t;
      for (int it = 0; it < iters; ++it) {
        const auto t0 = Clock::now();
        for (const Piece& p : ps) DS4_CUDA_CHECK(cudaMemcpy(d + p.dst, host + p.src, p.bytes, cudaMemcpyHostToDevice));
        DS4_CUDA_CHECK(cudaDeviceSynchronize());
        t.push_back(secs(t0));
      }
      rows.push_back({"plain cudaMemcpy per piece (pageable)", total / 1e9 / median(t), ps.size()});
    }
    auto staged = [&](const std::string& name, dc::StagingOptions o) {
      o.progress = "off";
      std::vector<double> t;
      uint64_t copies = 0;
      for (int it = 0; it < iters; ++it) {
        DS4_CUDA_CHECK(cudaMemset(d, 0, dev_bytes));
        DS4_CUDA_CHECK(cudaDeviceSynchronize());
        const auto t0 = Clock::now();
        dc::StagedUpload st(d, total, "bench", o);
        for (const Piece& p : ps) st.put(p.dst, host + p.src, p.bytes);
        copies = st.finish().copies;
        t.push_back(secs(t0));  // includes the pinned allocation, as a model load pays it
      }
      verify(name.c_str());
      rows.push_back({name, total / 1e9 / median(t), copies});
    };
    staged("staged 4 x 64 MiB pinned (default)", {});
    for (int slots : {2, 3})
      staged("staged " + std::to_string(slots) + " x 64 MiB pinned", {slots, size_t(64) << 20});
    for (size_t mib : {16, 256}) staged("staged 4 x " + std::to_string(mib) + " MiB pinned", {4, mib << 20});
    {
      dc::StagingOptions o;
      o.force_pageable = true;
      staged("staged fallback (pageable staging, sync copies)", o);
    }
    {  // pinned ceiling: the same byte count from one resident pinned buffer
      const size_t chunk = size_t(256) << 20;
      dc::PinnedHost pin(chunk);
      std::memcpy(pin.p, host, std::min(chunk, total));
      cudaStream_t s;
      DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      std::vector<double> t;
      for (int it = 0; it < iters; ++it) {
        const auto t0 = Clock::now();
        for (size_t at = 0; at < total; at += chunk)
          DS4_CUDA_CHECK(cudaMemcpyAsync(d + at, pin.p, std::min(chunk, total - at), cudaMemcpyHostToDevice, s));
        DS4_CUDA_CHECK(cudaStreamSynchronize(s));
        t.push_back(secs(t0));
      }
      DS4_CUDA_CHECK(cudaStreamDestroy(s));
      rows.push_back({"pinned cudaMemcpyAsync (ceiling)", total / 1e9 / median(t), (total + chunk - 1) / chunk});
    }
    {  // host memcpy alone (what staging adds on the CPU side), one thread
      std::vector<uint8_t> dst(size_t(64) << 20);
      const auto t0 = Clock::now();
      for (size_t at = 0; at < total; at += dst.size()) std::memcpy(dst.data(), host + at, std::min(dst.size(), total - at));
      rows.push_back({"host memcpy into one 64 MiB buffer", total / 1e9 / secs(t0), 0});
    }
    const double ceiling = rows[rows.size() - 2].gbps;
    std::printf("| path | GB/s | of pinned | copies |\n| --- | --- | --- | --- |\n");
    for (const Row& r : rows)
      std::printf("| %s | %.2f | %.2f | %llu |\n", r.path.c_str(), r.gbps, r.gbps / ceiling, (unsigned long long)r.copies);
    std::printf("staged vs plain: %.2fx; verify: %s\n", rows[1].gbps / rows[0].gbps, bad ? "MISMATCH" : "all bytes equal");
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_upload: %s\n", e.what());
    return 2;
  }
}
