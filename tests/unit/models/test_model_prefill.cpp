// The shared wrappers in model.cpp: chunking, logits modes, verify shape.
#include <gtest/gtest.h>

#include "models/model.h"

namespace ds4 {
namespace {

// A toy model whose logits are a deterministic function of the full token history, so
// chunking mistakes (dropped, repeated or reordered tokens) change the result.
class HistoryModel : public Model {
 public:
  struct State : ModelState {
    std::vector<int32_t> history;
    std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
    int64_t position() const override { return int64_t(history.size()); }
    size_t bytes() const override { return history.size() * sizeof(int32_t); }
  };
  HistoryModel() { info_.vocab_size = 3; info_.default_prefill_chunk = 4; }
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<ModelState> new_state() const override { return std::make_unique<State>(); }
  void forward(ModelState& s, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override {
    auto& st = static_cast<State&>(s);
    logits.clear();
    for (int32_t t : tokens) {
      st.history.push_back(t);
      ++calls_per_token_;
      if (mode == Logits::kAll) append_row(st, logits);
    }
    if (mode == Logits::kLast) append_row(st, logits);
    ++forward_calls;
  }
  int forward_calls = 0;

 private:
  void append_row(const State& st, std::vector<float>& out) {
    float h = 0;
    for (int32_t t : st.history) h = h * 31 + float(t % 7);
    out.push_back(float(st.history.size()));
    out.push_back(float(st.history.back()));
    out.push_back(h);
  }
  ModelInfo info_;
  int calls_per_token_ = 0;
};

TEST(ModelWrappers, ChunkedPrefillEqualsOneShot) {
  HistoryModel m;
  std::vector<int32_t> toks = {5, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  auto a = m.new_state();
  auto one_shot = m.prefill(*a, toks, 100);
  for (int chunk : {1, 3, 4, 7}) {
    auto b = m.new_state();
    EXPECT_EQ(m.prefill(*b, toks, chunk), one_shot) << "chunk " << chunk;
    EXPECT_EQ(b->position(), 10);
  }
}

TEST(ModelWrappers, DefaultChunkIsUsed) {
  HistoryModel m;
  std::vector<int32_t> toks(10, 1);
  auto s = m.new_state();
  m.prefill(*s, toks);
  EXPECT_EQ(m.forward_calls, 3);  // 4 + 4 + 2
}

TEST(ModelWrappers, VerifyReturnsEveryRowAndDecodeMatches) {
  HistoryModel m;
  std::vector<int32_t> toks = {2, 7, 1};
  auto a = m.new_state();
  auto all = m.verify(*a, toks);
  ASSERT_EQ(all.size(), 9u);
  auto b = m.new_state();
  for (size_t i = 0; i < toks.size(); ++i) {
    auto row = m.decode(*b, toks[i]);
    EXPECT_EQ(row, std::vector<float>(all.begin() + i * 3, all.begin() + i * 3 + 3));
  }
}

}  // namespace
}  // namespace ds4
