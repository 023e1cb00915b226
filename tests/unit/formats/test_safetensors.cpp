#include <gtest/gtest.h>

#include "core/error.h"
#include "core/half.h"
#include "core/weight.h"
#include "formats/safetensors.h"
#include "formats/tensor_source.h"
#include "test_util.h"

using namespace ds4;
using namespace ds4::test;

namespace {

std::vector<uint8_t> two_tensor_file() {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};            // {2, 3} F32
  std::vector<uint16_t> b = {0x3c00, 0x4000};           // {2} F16: 1, 2
  std::vector<uint8_t> data = as_bytes(a);
  auto bb = as_bytes(b);
  data.insert(data.end(), bb.begin(), bb.end());
  std::string h = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                  R"("b":{"dtype":"F16","shape":[2],"data_offsets":[24,28]}})";
  return safetensors_bytes(h, data);
}

SafetensorsFile parse(const std::vector<uint8_t>& b) { return read_safetensors(MappedFile::from_bytes("mem.safetensors", b)); }

std::string error_of(const std::string& header, const std::vector<uint8_t>& data = std::vector<uint8_t>(64)) {
  try {
    parse(safetensors_bytes(header, data));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Safetensors, ReadsTensorsAndMetadata) {
  SafetensorsFile st = parse(two_tensor_file());
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.metadata["format"], "pt");
  EXPECT_EQ(st.tensors[0].name, "a");
  EXPECT_EQ(st.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(st.tensors[0].bytes, 24u);
  EXPECT_EQ(static_cast<const float*>(st.tensors[0].data)[5], 6.0f);
  EXPECT_EQ(st.tensors[1].type, DType::F16);
  WeightMatrix w = as_matrix(st.tensors[0]);
  float row[3];
  dequantize_row(w, 1, row);
  EXPECT_EQ(row[0], 4.0f);
}

TEST(Safetensors, AllDtypesParse) {
  const char* names[] = {"F32", "F16", "BF16", "I8", "U8", "I32", "U32", "I64", "F8_E4M3"};
  const int sizes[] = {4, 2, 2, 1, 1, 4, 4, 8, 1};
  for (int i = 0; i < 9; ++i) {
    std::string h = std::string(R"({"t":{"dtype":")") + names[i] + R"(","shape":[4],"data_offsets":[0,)" +
                    std::to_string(4 * sizes[i]) + "]}}";
    SafetensorsFile st = parse(safetensors_bytes(h, std::vector<uint8_t>(32)));
    EXPECT_EQ(dtype_name(st.tensors[0].type), names[i]);
    EXPECT_EQ(st.tensors[0].bytes, size_t(4 * sizes[i]));
  }
}

TEST(Safetensors, Errors) {
  EXPECT_NE(error_of(R"({"t":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})").find("tensor 't'.dtype: unknown dtype 'F33'"), std::string::npos);
  EXPECT_NE(error_of(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})").find("data_offsets"), std::string::npos);
  EXPECT_NE(error_of(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})").find("needs 12"), std::string::npos);
  EXPECT_NE(error_of(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})").find("overflows"), std::string::npos);
  EXPECT_NE(error_of(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})").find("shape"), std::string::npos);
  EXPECT_NE(error_of(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})").find("duplicate tensor"), std::string::npos);
  EXPECT_NE(error_of(R"({"t":)").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of(std::string(1000, '[')).find("nested"), std::string::npos);
  std::vector<uint8_t> b = two_tensor_file();
  b.resize(6);
  EXPECT_THROW(parse(b), InputError);
  b = two_tensor_file();
  b[0] = 0xff;  // header length past the end
  try {
    parse(b);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mem.safetensors: header length"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, ShardedDirectoryWithIndexAndConfig) {
  auto dir = temp_dir("sharded");
  std::vector<float> a = {1, 2}, b = {3, 4, 5, 6};
  write_bytes(dir / "model-00001-of-00002.safetensors",
              safetensors_bytes(R"({"x.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})", as_bytes(a)));
  write_bytes(dir / "model-00002-of-00002.safetensors",
              safetensors_bytes(R"({"y.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", as_bytes(b)));
  std::string idx = R"({"metadata":{},"weight_map":{"x.weight":"model-00001-of-00002.safetensors","y.weight":"model-00002-of-00002.safetensors"}})";
  write_bytes(dir / "model.safetensors.index.json", std::vector<uint8_t>(idx.begin(), idx.end()));
  std::string cfg = R"({"model_type":"m","text_config":{"hidden_size":8}})";
  write_bytes(dir / "config.json", std::vector<uint8_t>(cfg.begin(), cfg.end()));
  auto src = open_tensor_source(dir.string());
  EXPECT_EQ(src->tensors().size(), 2u);
  EXPECT_EQ(src->config()["model_type"], "m");
  EXPECT_EQ(text_config(src->config())["hidden_size"], 8);
  const TensorInfo& y = src->get("y.weight", {2, 2});
  EXPECT_EQ(static_cast<const float*>(y.data)[3], 6.0f);
  EXPECT_NE(y.file.find("00002"), std::string::npos);
  try {
    src->get("y.weight", {4});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shape {2, 2}, expected {4}"), std::string::npos) << e.what();
  }
  EXPECT_THROW(src->get("nope"), InputError);
  // The same tensor in two shards is an error naming both files.
  write_bytes(dir / "model-00002-of-00002.safetensors",
              safetensors_bytes(R"({"x.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})", as_bytes(a)));
  EXPECT_THROW(open_tensor_source(dir.string()), InputError);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, MlxAffineTriple) {
  auto dir = temp_dir("mlx");
  // rows 2, cols 64, 4-bit, group 64: packed {2, 8} U32, scales/biases {2, 1} F16.
  std::vector<uint32_t> packed(16, 0x76543210u);
  std::vector<uint16_t> scales = {0x3c00, 0x4000}, biases = {0x0000, 0xbc00};  // 1, 2 ; 0, -1
  std::vector<uint8_t> data = as_bytes(packed);
  for (auto& v : {as_bytes(scales), as_bytes(biases)}) data.insert(data.end(), v.begin(), v.end());
  std::string h = R"({"l.weight":{"dtype":"U32","shape":[2,8],"data_offsets":[0,64]},)"
                  R"("l.scales":{"dtype":"F16","shape":[2,1],"data_offsets":[64,68]},)"
                  R"("l.biases":{"dtype":"F16","shape":[2,1],"data_offsets":[68,72]}})";
  write_bytes(dir / "model.safetensors", safetensors_bytes(h, data));
  auto src = open_tensor_source(dir.string());
  WeightMatrix w = mlx_matrix(*src, "l");
  EXPECT_EQ(w.type, DType::MLX_Q4);
  EXPECT_EQ(w.rows, 2);
  EXPECT_EQ(w.cols, 64);
  EXPECT_EQ(w.group_size, 64);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, MlxStackedExpertsSlice) {
  auto dir = temp_dir("mlx_stacked");
  // 3 experts, rows 2, cols 32, 8-bit, group 32: packed {3, 2, 8} U32, scales/biases {3, 2, 1} BF16.
  std::vector<uint32_t> packed(48);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = uint32_t(i) * 0x01010101u;
  std::vector<uint16_t> scales(6, 0x3f80), biases(6);  // scale 1.0 (bf16), bias = expert index
  for (int e = 0; e < 3; ++e) biases[size_t(2 * e)] = biases[size_t(2 * e + 1)] = f32_to_bf16(float(e));
  std::vector<uint8_t> data = as_bytes(packed);
  for (auto& v : {as_bytes(scales), as_bytes(biases)}) data.insert(data.end(), v.begin(), v.end());
  std::string h = R"({"e.weight":{"dtype":"U32","shape":[3,2,8],"data_offsets":[0,192]},)"
                  R"("e.scales":{"dtype":"BF16","shape":[3,2,1],"data_offsets":[192,204]},)"
                  R"("e.biases":{"dtype":"BF16","shape":[3,2,1],"data_offsets":[204,216]}})";
  write_bytes(dir / "model.safetensors", safetensors_bytes(h, data));
  std::string cfg = R"({"quantization":{"group_size":32,"bits":8}})";
  write_bytes(dir / "config.json", std::vector<uint8_t>(cfg.begin(), cfg.end()));
  auto src = open_tensor_source(dir.string());
  WeightMatrix w = mlx_matrix_slice(*src, "e", 2);
  EXPECT_EQ(w.type, DType::MLX_Q8);
  EXPECT_EQ(w.rows, 2);
  EXPECT_EQ(w.cols, 32);
  float row[32];
  dequantize_row(w, 1, row);  // expert 2, row 1: word index 2*16 + 8 = 40, byte values 40
  EXPECT_EQ(row[0], 40.0f + 2.0f);
  EXPECT_EQ(row[4], 41.0f + 2.0f);
  EXPECT_THROW(mlx_matrix_slice(*src, "e", 3), InputError);
  std::filesystem::remove_all(dir);
}
