#pragma once
// An engine on the tiny GLM 5.x model (its MTP head merged in) with a recording codec: the
// token ids every turn emits, read turn by turn; prompts are raw id lists seeded by an index.
// Shared by the batching and admission tests (tests/unit/batching).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>

#include "draft_head_run.h"
#include "engine/engine.h"
#include "recording_codec.h"

namespace ds4::engine {

// One turn read event by event (several are read interleaved: events queue in the handle).
struct Turn {
  std::shared_ptr<RequestHandle> h;
  size_t log_index = 0;  // its stream in the IdLog (turns start in submission order)
  int text_events = 0;
  std::optional<GenEvent> done;
  std::string text;
  // Reads until `events` text events arrived or the turn ended.
  void pump(int events = 1 << 30) {
    using namespace std::chrono_literals;
    while (!done && text_events < events) {
      auto ev = h->next(120s);
      if (!ev) throw std::runtime_error("timeout");
      if (ev->kind == GenEvent::Kind::kError) throw std::runtime_error(ev->text);
      if (ev->kind == GenEvent::Kind::kDone) done = *ev;
      if (ev->kind == GenEvent::Kind::kContent) text_events++, text += ev->text;
    }
  }
};

class GlmEngine : public ::testing::Test {
 public:  // shared test bodies (free functions) take the fixture
  void SetUp() override {
    const std::string data = DS4_TEST_DATA;
    dir_ = draft_test::trunk_with_head_dir("ds4-batching-glm", data + "/glm5/model", data + "/glm5/mtp/mtp.safetensors");
    std::filesystem::copy_file(std::filesystem::path(data) / "glm5/model/tokenizer.json",
                               std::filesystem::path(dir_) / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // prefill_chunk 16: prompts of 20..60 ids take several slices. `tune` adjusts the rest.
  std::unique_ptr<Engine> engine(int depth, bool batching = true, int64_t step_tokens = 0,
                                 const std::function<void(EngineOptions&)>& tune = {}) {
    LoadOptions lo;
    lo.threads = 2;
    std::unique_ptr<Model> model = load_model(dir_, lo);
    if (wrap_model) model = wrap_model(std::move(model));
    log_ = std::make_shared<IdLog::element_type>();
    auto codec = std::make_unique<RecordingCodec>(TokCodec::open(dir_, model->info().family), log_);
    EngineOptions o;
    o.spec_depth = depth;
    o.batching = batching;
    o.step_tokens = step_tokens;
    o.prefill_chunk = 16;
    if (tune) tune(o);
    return std::make_unique<Engine>(std::move(model), std::move(codec), o);
  }

  // A greedy completion-mode turn on prompt ids seeded by `i` (20 + 8i ids).
  GenRequest request(int i, int64_t max_tokens, std::optional<bool> spec = std::nullopt) {
    std::string p(RecordingCodec::kIdPrompt);
    uint32_t x = 977u * uint32_t(i + 3);
    for (int k = 0; k < 20 + 8 * i; ++k) x = x * 1664525u + 1013904223u, p += std::to_string(1 + (x >> 9) % 1000) + " ";
    GenRequest r;
    r.raw_prompt = p;
    r.max_tokens = max_tokens;
    r.sampler.temperature = 0;
    r.spec_enabled = spec;
    return r;
  }
  Turn submit(Engine& e, GenRequest r) {
    Turn t;
    t.h = e.submit(std::move(r));
    return t;
  }
  std::vector<int32_t> ids(const Turn& t) const { return (*log_)[t.log_index]; }

  // Each request alone on a fresh AR engine: the reference ids.
  std::vector<std::vector<int32_t>> alone(int n, const std::function<GenRequest(int)>& req) {
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < n; ++i) {
      auto e = engine(0);
      Turn t = submit(*e, req(i));
      t.pump();
      out.push_back((*log_)[0]);
    }
    return out;
  }
  std::vector<std::vector<int32_t>> alone(int n, int64_t max_tokens) {
    return alone(n, [&](int i) { return request(i, max_tokens); });
  }

  std::string dir_;
  IdLog log_;
  // Set by a test: wraps each loaded model before its engine takes it (e.g. to inject faults).
  std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)> wrap_model;
};

}  // namespace ds4::engine
