// Randomized corruption: thousands of mutated GGUF and safetensors files must each parse
// or fail with ds4::InputError, never crash (the debug build runs this under ASan/UBSan,
// which also catches any tensor view reaching outside the buffer: every byte of every view
// of an accepted file is read).
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "test_util.h"

using namespace ds4;
using namespace ds4::test;

namespace {

std::vector<uint8_t> gguf_seed() {
  auto dir = temp_dir("fuzz_seed");
  auto p = dir / "s.gguf";
  {
    GgufWriter w(p.string());
    w.set("general.architecture", GgufValue::string("x"));
    GgufValue arr;
    arr.type = GgufType::ARRAY;
    arr.elem_type = GgufType::U32;
    for (int i = 0; i < 4; ++i) arr.items.push_back(GgufValue::scalar(GgufType::U32, i));
    w.set("x.list", arr);
    w.set("x.f", GgufValue::scalar(GgufType::F32, 1.5f));
    w.add_tensor("a", DType::F32, {2, 4});
    w.add_tensor("b", DType::Q8_0, {1, 32});
    std::vector<uint8_t> z(32 + 34, 7);
    w.write(z.data(), z.size());
    w.finish();
  }
  auto b = read_bytes(p);
  std::filesystem::remove_all(dir);
  return b;
}

std::vector<uint8_t> st_seed() {
  std::vector<uint8_t> data(40, 3);
  return safetensors_bytes(R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,4],"data_offsets":[0,32]},)"
                           R"("b":{"dtype":"I8","shape":[8],"data_offsets":[32,40]}})", data);
}

std::vector<uint8_t> mutate(std::vector<uint8_t> b, std::mt19937_64& rng) {
  int kind = int(rng() % 5);
  int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits && !b.empty(); ++e) {
    size_t at = rng() % b.size();
    switch (kind) {
      case 0: b[at] ^= uint8_t(1u << (rng() % 8)); break;                     // bit flip
      case 1: b[at] = uint8_t(rng()); break;                                   // random byte
      case 2: {                                                                // random / extreme u64
        uint64_t v = rng() % 3 == 0 ? ~uint64_t(0) - (rng() % 4) : rng() % 3 == 1 ? rng() % 300 : rng();
        for (int i = 0; i < 8 && at + size_t(i) < b.size(); ++i) b[at + size_t(i)] = uint8_t(v >> (8 * i));
        break;
      }
      case 3: b.resize(at); break;                                             // truncate
      case 4: b.insert(b.begin() + long(at), uint8_t(rng())); break;           // insert
    }
  }
  return b;
}

// Reads every byte of every tensor view: out-of-bounds views trip ASan.
uint64_t touch(const void* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<const uint8_t*>(p)[i];
  return s;
}

}  // namespace

TEST(FormatsFuzz, MutatedGgufNeverCrashes) {
  std::mt19937_64 rng(42);
  const auto seed = gguf_seed();
  int accepted = 0, rejected = 0;
  uint64_t sink = 0;
  for (int i = 0; i < 6000; ++i) {
    auto b = mutate(seed, rng);
    try {
      GgufFile g = read_gguf(MappedFile::from_bytes("fuzz.gguf", b));
      for (const auto& kv : g.kvs) sink += kv.value.to_json().dump().size();
      for (const auto& t : g.tensors) sink += touch(g.tensor_data(t), t.bytes);
      ++accepted;
    } catch (const InputError& e) {
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.gguf: ", 0), 0u) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);  // the mutations do hit the validation paths
  EXPECT_GT(accepted, 10);    // ... and harmless ones still parse
  EXPECT_GT(sink, 0u);
}

TEST(FormatsFuzz, MutatedSafetensorsNeverCrashes) {
  std::mt19937_64 rng(7);
  const auto seed = st_seed();
  int accepted = 0, rejected = 0;
  uint64_t sink = 0;
  for (int i = 0; i < 6000; ++i) {
    auto b = mutate(seed, rng);
    try {
      SafetensorsFile st = read_safetensors(MappedFile::from_bytes("fuzz.safetensors", b));
      for (const auto& t : st.tensors) sink += touch(t.data, t.bytes);
      ++accepted;
    } catch (const InputError& e) {
      ASSERT_EQ(std::string(e.what()).rfind("fuzz.safetensors: ", 0), 0u) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 10);
}
