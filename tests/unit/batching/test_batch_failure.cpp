// A batched decode forward that throws (Model::decode_batch's contract, models/model.h): every
// turn of that batch ends with an error (their states are unspecified and never published),
// the engine counts each as a failed request, returns their memory, and keeps serving: a turn
// submitted afterwards emits exactly its alone token ids.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "engine_idle.h"
#include "glm_engine_fixture.h"

namespace ds4::engine {
namespace {

// The tiny GLM with decode_batch throwing on its `fail_at`-th call (after running it, so the
// states have advanced: the worst case of the contract).
class FailingBatchModel : public Model {
 public:
  FailingBatchModel(std::unique_ptr<Model> inner, int fail_at, std::atomic<int>* failed_rows)
      : inner_(std::move(inner)), fail_at_(fail_at), failed_rows_(failed_rows) {}
  const ModelInfo& info() const override { return inner_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return inner_->new_state(); }
  void forward(ModelState& s, std::span<const int32_t> t, Logits mode, std::vector<float>& logits) override {
    inner_->forward(s, t, mode, logits);
  }
  void forward_candidates(ModelState& s, std::span<const int32_t> t, const CandidateRequest& req,
                          SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) override {
    inner_->forward_candidates(s, t, req, out, logits, need_full);
  }
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override {
    inner_->decode_batch(states, tokens, logits);
    if (++calls_ == fail_at_) {
      failed_rows_->store(int(states.size()));
      throw Error("injected: batched decode failed after the forward");
    }
  }
  StateCost state_cost(bool draft) override { return inner_->state_cost(draft); }
  size_t state_memory_available() override { return inner_->state_memory_available(); }

 private:
  std::unique_ptr<Model> inner_;
  int fail_at_, calls_ = 0;
  std::atomic<int>* failed_rows_;
};

class BatchFailure : public GlmEngine {};

TEST_F(BatchFailure, EveryTurnOfAThrowingBatchFailsAndServingGoesOn) {
  const auto ref = alone(1, 24);
  std::atomic<int> failed_rows{0};
  wrap_model = [&](std::unique_ptr<Model> m) -> std::unique_ptr<Model> {
    return std::make_unique<FailingBatchModel>(std::move(m), 3, &failed_rows);
  };
  auto e = engine(0);
  std::vector<Turn> turns;
  for (int i = 0; i < 4; ++i) turns.push_back(submit(*e, request(i, 24)));
  int errors = 0, finished = 0;
  for (auto& t : turns) {
    try {
      t.pump();
      finished++;
    } catch (const std::runtime_error& err) {
      EXPECT_NE(std::string(err.what()).find("injected"), std::string::npos) << err.what();
      errors++;
    }
  }
  ASSERT_GE(failed_rows.load(), 2) << "the third decode_batch call carried several turns";
  EXPECT_EQ(errors, failed_rows.load()) << "exactly the turns of the throwing batch fail";
  EXPECT_EQ(finished + errors, 4);
  EngineMetrics m = wait_until_idle(*e);
  EXPECT_EQ(m.requests_failed, uint64_t(errors)) << "each failed turn counts as a failed request";
  EXPECT_EQ(m.live, 0);
  EXPECT_EQ(m.state_bytes, 0u);

  // The engine serves on: a new turn (decode_batch never fails again) equals its alone ids.
  Turn t = submit(*e, request(0, 24));
  t.pump();
  EXPECT_EQ(log_->back(), ref[0]);
}

}  // namespace
}  // namespace ds4::engine
