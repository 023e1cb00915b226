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
#include "models/qwen_next/model.h"

namespace ds4::qwen_next {
namespace {

// The last rows(old) rows of [old ; in[0..keep)], both {rows, width} row-major.
void tail_rows(const std::vector<float>& old, const std::vector<float>& in, int64_t keep, int64_t width,
               std::vector<float>& out) {
  const size_t r = old.size();
  std::vector<float> all(old);
  all.insert(all.end(), in.begin(), in.begin() + keep * width);
  out.assign(all.end() - int64_t(r), all.end());
}

void truncate_rows(std::vector<float>& v, int64_t rows_now, int64_t rows_kept) {
  if (v.empty() || rows_now == 0) return;
  v.resize(v.size() / size_t(rows_now) * size_t(rows_kept));
}

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
    truncate_rows(s.k, pos0 + n, pos0 + keep);
    truncate_rows(s.v, pos0 + n, pos0 + keep);
    truncate_rows(s.idx_raw, pos0 + n, pos0 + keep);
    s.idx_pooled.resize(std::min(s.idx_pooled.size(), size_t((pos0 + keep) / c.idx_ratio * c.idx_dim)));
  }
  k = RowCapture{};
}

}  // namespace

bool QwenNextModel::verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) {
  auto& st = dynamic_cast<State&>(trial);
  if (!st.cap_tokens.empty()) throw Error("qwen_next: verify_capture over an uncommitted captured window");
  for (auto& l : st.layers) l.cap.on = true;
  try {
    forward(trial, tokens, Logits::kAll, logits);
  } catch (...) {
    for (auto& l : st.layers) l.cap = RowCapture{};
    throw;
  }
  for (auto& l : st.layers) l.cap.on = false;  // the records stay until commit_prefix
  st.cap_tokens.assign(tokens.begin(), tokens.end());
  return true;
}

void QwenNextModel::commit_prefix(ModelState& trial, int64_t keep) {
  auto& st = dynamic_cast<State&>(trial);
  const int64_t n = int64_t(st.cap_tokens.size());
  if (n == 0) throw Error("qwen_next: commit_prefix without a captured verify window");
  if (keep < 1 || keep > n)
    throw Error("qwen_next: commit_prefix keeps " + std::to_string(keep) + " of " + std::to_string(n) + " rows");
  const int64_t pos0 = st.pos - n;
  if (keep < n) {
    for (auto& l : st.layers) commit_layer(cfg_, l, pos0, n, keep, st.cap_tokens.data());
    if (st.mtp_on) {
      // forward() appended one pending pair per verified row after the first (plus the
      // pair of the previous last row): drop the n - keep pairs of the dropped rows; the
      // first dropped pair holds the trunk row of the last kept token.
      const int64_t W = cfg_.wide(), P = int64_t(st.pending_next.size()), drop = n - keep;
      if (P < drop) throw Error("qwen_next: commit_prefix: MTP pending rows out of step");
      st.last_wide.assign(st.pending_wide.begin() + (P - drop) * W, st.pending_wide.begin() + (P - drop + 1) * W);
      st.pending_wide.resize(size_t((P - drop) * W));
      st.pending_next.resize(size_t(P - drop));
    }
    st.pos = pos0 + keep;
  } else {
    for (auto& l : st.layers) l.cap = RowCapture{};
  }
  st.cap_tokens.clear();
}

}  // namespace ds4::qwen_next
