#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tensor_source.h"
#include "test_util.h"

using namespace ds4;
using namespace ds4::test;

namespace {

GgufValue arr(GgufType et, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = et;
  v.items = std::move(items);
  return v;
}

// A file with every metadata type, a nested array and tensors of several types.
std::filesystem::path make_sample(const std::filesystem::path& dir, uint64_t alignment = 32) {
  auto p = dir / "sample.gguf";
  GgufWriter w(p.string(), alignment);
  w.set("general.architecture", GgufValue::string("deepseek4"));
  w.set("t.u8", GgufValue::scalar(GgufType::U8, 200));
  w.set("t.i8", GgufValue::scalar(GgufType::I8, -100));
  w.set("t.u16", GgufValue::scalar(GgufType::U16, 60000));
  w.set("t.i16", GgufValue::scalar(GgufType::I16, -30000));
  w.set("t.u32", GgufValue::scalar(GgufType::U32, 4000000000u));
  w.set("t.i32", GgufValue::scalar(GgufType::I32, -2000000000));
  w.set("t.f32", GgufValue::scalar(GgufType::F32, 0.5f));
  w.set("t.bool", GgufValue::scalar(GgufType::BOOL, true));
  w.set("t.u64", GgufValue::scalar(GgufType::U64, uint64_t(1) << 40));
  w.set("t.i64", GgufValue::scalar(GgufType::I64, -(int64_t(1) << 40)));
  w.set("t.f64", GgufValue::scalar(GgufType::F64, 0.25));
  w.set("deepseek4.block_count", GgufValue::scalar(GgufType::U32, 2));
  w.set("t.strs", arr(GgufType::STRING, {GgufValue::string("a"), GgufValue::string("bc")}));
  w.set("t.nested", arr(GgufType::ARRAY, {arr(GgufType::I32, {GgufValue::scalar(GgufType::I32, 1)}),
                                          arr(GgufType::I32, {GgufValue::scalar(GgufType::I32, 2), GgufValue::scalar(GgufType::I32, 3)})}));
  w.add_tensor("a", DType::F32, {2, 3});
  w.add_tensor("b", DType::Q8_0, {2, 32});
  w.add_tensor("c", DType::F16, {5});
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  w.write(a.data(), 24);
  std::vector<uint8_t> q(68, 1);
  w.write(q.data(), 30);  // chunks may split a tensor
  w.write(q.data() + 30, 38);
  std::vector<uint16_t> c(5, 0x3c00);
  w.write(c.data(), 10);
  w.finish();
  return p;
}

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    read_gguf(MappedFile::from_bytes("bad.gguf", b));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) { std::memcpy(b.data() + at, &v, sizeof v); }

}  // namespace

TEST(Gguf, WriteThenReadAllTypes) {
  auto dir = temp_dir("gguf");
  GgufFile g = read_gguf(make_sample(dir).string());
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.find("t.u8")->value, 200);
  EXPECT_EQ(g.find("t.i16")->value, -30000);
  EXPECT_EQ(g.find("t.u32")->value, 4000000000u);
  EXPECT_EQ(g.find("t.f32")->value, 0.5);
  EXPECT_EQ(g.find("t.bool")->value, true);
  EXPECT_EQ(g.find("t.i64")->value, -(int64_t(1) << 40));
  EXPECT_EQ(g.find("t.nested")->to_json().dump(), "[[1],[2,3]]");
  EXPECT_EQ(g.find("t.strs")->to_json().dump(), R"(["a","bc"])");
  ASSERT_EQ(g.tensors.size(), 3u);
  EXPECT_EQ(g.tensors[1].shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(g.tensors[1].bytes, 68u);
  for (const auto& t : g.tensors) EXPECT_EQ(t.offset % 32, 0u);
  EXPECT_EQ(reinterpret_cast<const float*>(g.tensor_data(g.tensors[0]))[4], 5.0f);

  auto src = open_tensor_source((dir / "sample.gguf").string());
  EXPECT_EQ(src->metadata()["t.strs"][1], "bc");
  EXPECT_EQ(src->config()["architecture"], "deepseek4");
  EXPECT_EQ(src->config()["block_count"], 2);
  WeightMatrix m = as_matrix(src->get("b"));
  EXPECT_EQ(m.type, DType::Q8_0);
  EXPECT_EQ(m.cols, 32);
  std::filesystem::remove_all(dir);
}

TEST(Gguf, CustomAlignmentAndConfigJson) {
  auto dir = temp_dir("gguf_align");
  auto p = dir / "x.gguf";
  {
    GgufWriter w(p.string(), 64);
    w.set("ds4.config_json", GgufValue::string(R"({"hidden_size": 16})"));
    w.add_tensor("t0", DType::F32, {3});
    w.add_tensor("t1", DType::F32, {2});
    std::vector<float> v = {1, 2, 3, 4, 5};
    w.write(v.data(), 20);
    w.finish();
  }
  GgufFile g = read_gguf(p.string());
  EXPECT_EQ(g.alignment, 64u);
  EXPECT_EQ(g.data_offset % 64, 0u);
  EXPECT_EQ(g.tensors[1].offset, 64u);
  EXPECT_EQ(reinterpret_cast<const float*>(g.tensor_data(g.tensors[1]))[1], 5.0f);
  EXPECT_EQ(open_tensor_source(p.string())->config()["hidden_size"], 16);
  std::filesystem::remove_all(dir);
}

TEST(Gguf, StackedExpertSlice) {
  auto dir = temp_dir("gguf_slice");
  auto p = dir / "e.gguf";
  {
    GgufWriter w(p.string());
    w.add_tensor("experts", DType::F32, {3, 2, 4});  // {experts, rows, cols}
    std::vector<float> v(24);
    for (int i = 0; i < 24; ++i) v[size_t(i)] = float(i);
    w.write(v.data(), 96);
    w.finish();
  }
  auto src = open_tensor_source(p.string());
  WeightMatrix m = as_matrix_slice(src->get("experts"), 2);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 4);
  EXPECT_EQ(static_cast<const float*>(m.data)[0], 16.0f);
  EXPECT_THROW(as_matrix_slice(src->get("experts"), 3), InputError);
  EXPECT_THROW(as_matrix(src->get("experts")), InputError);
  std::filesystem::remove_all(dir);
}

namespace {
// Position of tensor info `name` in the sample file: returns the offset of its n_dims field.
size_t info_pos(const std::vector<uint8_t>& b, const std::string& name) {
  std::vector<uint8_t> pat(8);
  uint64_t n = name.size();
  std::memcpy(pat.data(), &n, 8);
  pat.insert(pat.end(), name.begin(), name.end());
  pat.push_back(0);  // low byte of n_dims (small), disambiguates from metadata strings
  for (size_t i = b.size() - pat.size(); i-- > 0;)
    if (std::memcmp(b.data() + i, pat.data(), pat.size() - 1) == 0 && b[i + pat.size() - 1] != 0 &&
        b[i + pat.size()] == 0)
      return i + pat.size() - 1;
  ADD_FAILURE() << "tensor info " << name << " not found";
  return 0;
}

std::vector<uint8_t> sample_bytes() {
  auto dir = temp_dir("gguf_corrupt");
  auto b = read_bytes(make_sample(dir));
  std::filesystem::remove_all(dir);
  return b;
}

void expect_error(const std::vector<uint8_t>& b, const std::string& needle) {
  std::string e = error_of(b);
  EXPECT_NE(e.find("bad.gguf: "), std::string::npos) << e;
  EXPECT_NE(e.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << e;
}
}  // namespace

TEST(GgufCorrupt, Truncated) {
  auto b = sample_bytes();
  for (size_t n : {size_t(0), size_t(3), size_t(20), size_t(100), b.size() / 2, b.size() - 1}) {
    std::vector<uint8_t> t(b.begin(), b.begin() + long(n));
    std::string e = error_of(t);
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("past the end") != std::string::npos ||
                e.find("exceeds the file size") != std::string::npos) << n << ": " << e;
  }
}

TEST(GgufCorrupt, BadMagic) {
  auto b = sample_bytes();
  b[0] = 'X';
  expect_error(b, "header.magic: not a GGUF file");
}

TEST(GgufCorrupt, BadVersion) {
  auto b = sample_bytes();
  poke<uint32_t>(b, 4, 7);
  expect_error(b, "header.version: unsupported version 7");
}

TEST(GgufCorrupt, OffsetPastEnd) {
  auto b = sample_bytes();
  size_t p = info_pos(b, "c");  // n_dims(4) ne(8) type(4) offset(8)
  poke<uint64_t>(b, p + 16, uint64_t(1) << 20);
  expect_error(b, "tensor 'c'.offset: data [1048576, +10) runs past the end");
}

TEST(GgufCorrupt, OverflowingShape) {
  auto b = sample_bytes();
  size_t p = info_pos(b, "a");  // n_dims(4) ne0(8) ne1(8)
  poke<uint64_t>(b, p + 4, uint64_t(1) << 40);
  poke<uint64_t>(b, p + 12, uint64_t(1) << 40);
  expect_error(b, "tensor 'a'.ne: shape overflows");
}

TEST(GgufCorrupt, DuplicateTensor) {
  auto b = sample_bytes();
  size_t p = info_pos(b, "b");
  b[p - 1] = 'a';
  expect_error(b, "tensor 'a': duplicate tensor name");
}

TEST(GgufCorrupt, DuplicateKey) {
  auto b = sample_bytes();
  const char* k = "t.i16";
  auto it = std::search(b.begin(), b.end(), k, k + 5);
  ASSERT_NE(it, b.end());
  *(it + 2) = 'u';  // "t.i16" -> "t.u16", which exists already
  expect_error(b, "kv 't.u16': duplicate key");
}

TEST(GgufCorrupt, UnknownDtype) {
  auto b = sample_bytes();
  size_t p = info_pos(b, "c");
  poke<uint32_t>(b, p + 12, 99);
  expect_error(b, "tensor 'c'.type: unknown or unsupported ggml type 99");
}

TEST(GgufCorrupt, Misaligned) {
  auto b = sample_bytes();
  size_t p = info_pos(b, "b");
  uint64_t off;
  std::memcpy(&off, b.data() + p + 24, 8);  // n_dims(4) ne(16) type(4) offset
  poke<uint64_t>(b, p + 24, off + 4);
  expect_error(b, "tensor 'b'.offset: offset " + std::to_string(off + 4) + " is not a multiple of alignment 32");
}

TEST(GgufCorrupt, HugeCounts) {
  auto b = sample_bytes();
  poke<uint64_t>(b, 16, uint64_t(1) << 60);
  expect_error(b, "header.kv_count");
  b = sample_bytes();
  poke<uint64_t>(b, 8, uint64_t(1) << 60);
  expect_error(b, "header.tensor_count");
}

TEST(GgufCorrupt, InvalidUtf8String) {
  auto b = sample_bytes();
  const char* k = "t.u16";
  auto it = std::search(b.begin(), b.end(), k, k + 5);
  ASSERT_NE(it, b.end());
  *(it + 2) = char(0xF3);  // a 4-byte lead without continuation bytes
  expect_error(b, "kv[3].key: string at offset 115 is not valid UTF-8");
}

TEST(Gguf, Ds4StyleStackedExperts) {
  // antirez/ds4 stores routed experts as one tensor per layer: ffn_gate_exps {experts, F, E}
  // in IQ2_XXS and ffn_down_exps {experts, E, F} in Q2_K (torch order).
  auto dir = temp_dir("gguf_ds4");
  auto p = dir / "ds4.gguf";
  std::vector<uint8_t> gate(size_t(3 * 2 * 66)), down(size_t(3 * 256 * 84));
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = uint8_t(i * 7);
  for (size_t i = 0; i < down.size(); ++i) down[i] = uint8_t(i * 13);
  {
    GgufWriter w(p.string());
    w.set("general.architecture", GgufValue::string("deepseek4"));
    w.add_tensor("blk.0.ffn_gate_exps.weight", DType::IQ2_XXS, {3, 2, 256});
    w.add_tensor("blk.0.ffn_down_exps.weight", DType::Q2_K, {3, 256, 256});
    w.write(gate.data(), gate.size());
    w.write(down.data(), down.size());
    w.finish();
  }
  auto src = open_tensor_source(p.string());
  WeightMatrix g = as_matrix_slice(src->get("blk.0.ffn_gate_exps.weight", {3, 2, 256}), 1);
  EXPECT_EQ(g.type, DType::IQ2_XXS);
  EXPECT_EQ(std::memcmp(g.data, gate.data() + 2 * 66, 2 * 66), 0);
  WeightMatrix d = as_matrix_slice(src->get("blk.0.ffn_down_exps.weight"), 2);
  EXPECT_EQ(d.rows, 256);
  EXPECT_EQ(std::memcmp(d.data, down.data() + 2 * 256 * 84, 256 * 84), 0);
  std::filesystem::remove_all(dir);
}

// write_zeros seeks instead of writing: a hole in the middle and one at the very end (the
// file must still reach its declared length) both read back as zeros, and the file equals
// the one written with explicit zero bytes.
TEST(Gguf, WriteZerosLeavesHolesThatReadAsZeros) {
  auto dir = temp_dir("gguf_holes");
  auto make = [&](const char* name, bool holes) {
    GgufWriter w((dir / name).string());
    w.add_tensor("a", DType::F32, {3});
    w.add_tensor("hole", DType::F32, {1 << 16});
    w.add_tensor("b", DType::F32, {2});
    w.add_tensor("tail", DType::F32, {1 << 14});
    const std::vector<float> a = {1, 2, 3}, b = {4, 5};
    const std::vector<uint8_t> zeros(size_t(4) << 16, 0);
    w.write(a.data(), 12);
    if (holes) w.write_zeros(size_t(4) << 16);
    else w.write(zeros.data(), size_t(4) << 16);
    w.write(b.data(), 8);
    if (holes) w.write_zeros(size_t(4) << 14);
    else w.write(zeros.data(), size_t(4) << 14);
    w.finish();
    return read_bytes(dir / name);
  };
  const std::vector<uint8_t> sparse = make("sparse.gguf", true), dense = make("dense.gguf", false);
  EXPECT_EQ(sparse, dense);
  auto src = open_tensor_source((dir / "sparse.gguf").string());
  EXPECT_EQ(static_cast<const float*>(src->get("b").data)[1], 5.0f);
  const auto& tail = src->get("tail");
  const auto* t = static_cast<const uint8_t*>(tail.data);
  EXPECT_EQ(std::count(t, t + tail.bytes, uint8_t(0)), int64_t(tail.bytes));
  std::filesystem::remove_all(dir);
}
