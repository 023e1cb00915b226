// Captured-prefix commit for speculative decoding (MTPLX gdn_capture.commit_captured_prefix):
// a verify window of n rows runs once on a clone while every layer records what it cannot
// cut back; keeping the first `keep` rows then costs copies, never a second forward.
//   GDN   recurrent state after row keep-1 (captured per row); conv state = the last K-1
//         rows of [conv before the window ; input rows 0..keep-1]
//   PLE   token context = last ngram-1 of [context before ; tokens 0..keep-1]; dilated conv
//         history likewise from its input rows
//   QSA   append-only caches (K, V, raw indexer keys) truncated to the kept positions;
//         pooled indexer blocks that the dropped rows completed are dropped
//   MTP   the head's pending (trunk row, next token) pairs of the dropped rows are dropped
//         and the trunk row of the last kept token becomes last_wide
#include <algorithm>

#include "core/error.h"
#include "models/capture_rows.h"
#include "models/draft_head.h"
#include "models/qwen_next/model.h"

namespace ds4::qwen_next {
namespace {

void commit_layer(const Config& c, LayerState& s, int64_t pos0, int64_t n, int64_t keep, const int32_t* tokens) {
  RowCapture& k = s.cap;
  if (!k.ssm.empty()) {
    const size_t sz = s.ssm.size();
    std::copy_n(k.ssm.begin() + int64_t(size_t(keep - 1) * sz), sz, s.ssm.begin());
    tail_rows(k.conv0, k.conv_in, keep, c.conv_dim(), s.conv);
  }
  if (!k.ple_in.empty()) {
    tail_rows(k.ple_conv0, k.ple_in, keep, c.wide(), s.ple_conv);
    std::vector<int32_t> hist(k.ple_ctx0);
    hist.insert(hist.end(), tokens, tokens + keep);
    s.ple_ctx.assign(hist.end() - int64_t(k.ple_ctx0.size()), hist.end());
  }
  if (!s.k.empty() || !s.idx_raw.empty()) {  // QSA
    for (PagedRows* rows : {&s.k, &s.v, &s.idx_raw})
      if (!rows->empty()) rows->truncate(pos0 + keep);
    s.idx_pooled.truncate(std::min(s.idx_pooled.rows(), (pos0 + keep) / c.idx_ratio));
  }
  k = RowCapture{};
}

}  // namespace

namespace {
void capture_begin(State& st) {
  if (!st.cap_tokens.empty()) throw Error("qwen_next: verify_capture over an uncommitted captured window");
  for (auto& l : st.layers) l.cap.on = true;
}
void capture_end(State& st, std::span<const int32_t> tokens) {
  for (auto& l : st.layers) l.cap.on = false;  // the records stay until commit_prefix
  st.cap_tokens.assign(tokens.begin(), tokens.end());
}
void capture_abort(State& st) {
  for (auto& l : st.layers) l.cap = RowCapture{};
}
State& as_state(ModelState& s) {
  auto* st = dynamic_cast<State*>(&s);
  if (!st) throw Error("qwen_next: got a state of another model family");
  return *st;
}
}  // namespace

bool QwenNextModel::verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) {
  State& st = as_state(trial);
  capture_begin(st);
  return captured_verify(*this, trial, tokens, logits, [] {}, [&] { capture_end(st, tokens); },
                         [&] { capture_abort(st); });
}

bool QwenNextModel::verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                                 std::vector<float>& logits) {
  if (on_layer) return Model::verify_batch(states, windows, logits);  // the debug hook sees one sequence per call
  return captured_verify_batch(
      *this, states, windows, logits, "qwen_next: verify_batch", [&](ModelState& s) { capture_begin(as_state(s)); },
      [&] { forward_windows(states, windows, Logits::kAll, logits); },
      [&](ModelState& s, std::span<const int32_t> w) { capture_end(as_state(s), w); },
      [&](ModelState& s) { capture_abort(as_state(s)); });
}

void QwenNextModel::commit_prefix(ModelState& trial, int64_t keep) {
  auto& st = dynamic_cast<State&>(trial);
  const int64_t n = int64_t(st.cap_tokens.size());
  check_commit_keep("qwen_next", n, keep);
  const int64_t pos0 = st.pos - n;
  if (keep < n) {
    for (auto& l : st.layers) commit_layer(cfg_, l, pos0, n, keep, st.cap_tokens.data());
    if (st.mtp_on)
      drop_pending_pairs(st.pending_wide, st.pending_next, st.last_wide, cfg_.wide(), n - keep, "qwen_next");
    st.pos = pos0 + keep;
  } else {
    for (auto& l : st.layers) l.cap = RowCapture{};
  }
  st.cap_tokens.clear();
}

}  // namespace ds4::qwen_next
