#pragma once
// The act_quant test model of the CUDA DeepSeek V4 tests (test_deepseek_v4_actq_cuda,
// test_deepseek_v4_verify_batch_cuda): the tiny config at hidden 256 / expert ff 256 (the 2-bit
// formats need rows of 256), synthetic weights, ds4's GGUF layout and formats (Q8_0 attention,
// shared expert and lm_head, IQ2_XXS expert gate / up, Q2_K expert down), so the act_quant
// products run.
#include <string>

#include "formats/tensor_source.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/gguf.h"
#include "models/deepseek_v4/synthetic.h"

namespace ds4::cuda_test {

// To `path`; with `mtp`, ds4's MTP head too (Q8_0 e_proj / h_proj, its block in the trunk's formats).
inline void write_actq_model(const std::string& root, const std::string& path, bool mtp = false) {
  nlohmann::json cfg = open_tensor_source(root + "/tests/data/deepseek_v4/model")->config();
  cfg["hidden_size"] = 256;
  cfg["moe_intermediate_size"] = 256;
  cfg["num_nextn_predict_layers"] = mtp ? 1 : 0;
  cfg["_name_or_path"] = "tiny-actq-synthetic";
  auto src = deepseek_v4::synthetic_source(cfg);
  deepseek_v4::Ds4ExportOptions opt;
  opt.expert_type = DType::IQ2_XXS;
  opt.expert_down_type = DType::Q2_K;
  deepseek_v4::export_ds4_gguf(*src, deepseek_v4::parse_config(cfg, path), path, opt);
}

}  // namespace ds4::cuda_test
