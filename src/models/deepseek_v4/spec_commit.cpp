// Captured-prefix commit for DeepSeek V4 (the MTPLX capture_commit scheme of qwen_next,
// applied to this family's state; the row arithmetic is shared: models/capture_rows.h).
//   window   sliding KV window = the last (sliding_window - 1) rows of [window before ;
//            the window's rope'd KV rows 0..keep-1]
//   lanes    compressor / indexer lanes: the open window and Ca half before, advanced over
//            the kept rows with the rows the verify pushed; the entries pooled by the
//            dropped rows are cut (compressor_commit): nothing is pooled twice
//   HC       hyper-connection streams are per token: nothing carries over
//   MTP      the head's window likewise; its output HC rows of the kept token become mtp_last_y
//   DSpark   every stage's ring = the last `window` rows of [ring before ; new rows 0..keep-1]
#include "models/deepseek_v4/spec_commit.h"

#include <algorithm>

#include "core/error.h"
#include "models/capture_rows.h"
#include "models/deepseek_v4/layers.h"

namespace ds4::deepseek_v4 {

void capture_begin(State& s) {
  if (!s.cap_tokens.empty()) throw Error("deepseek_v4: verify_capture over an uncommitted captured window");
  s.cap_on = true;
  for (auto& l : s.layers) l.cap.on = true;
  s.mtp.cap.on = s.mtp_on;
  s.cap_ring0 = s.dspark_ring;
  s.cap_ring_rows.assign(s.dspark_ring.size(), {});
  s.cap_dspark_n0 = s.dspark_n;
}

void capture_end(State& s, std::span<const int32_t> tokens) {
  s.cap_on = false;  // the records stay until commit_captured_prefix
  for (auto& l : s.layers) l.cap.on = false;
  s.mtp.cap.on = false;
  s.cap_tokens.assign(tokens.begin(), tokens.end());
}

void capture_abort(State& s) {
  s.cap_on = false;
  for (auto& l : s.layers) l.cap = LayerCapture{};
  s.mtp.cap = LayerCapture{};
  s.cap_tokens.clear();
  s.cap_mtp_y.clear();
  s.cap_ring0.clear();
  s.cap_ring_rows.clear();
}

void commit_captured_prefix(const Config& c, const Weights& w, State& s, int64_t keep) {
  const int64_t n = int64_t(s.cap_tokens.size());
  check_commit_keep("deepseek_v4", n, keep);
  const int64_t p0 = s.pos - n;
  if (keep < n) {
    for (int64_t l = 0; l < c.layers; ++l) attention_commit(c, w.layers[size_t(l)], l, s.layers[size_t(l)], keep, p0);
    if (s.mtp_on && w.mtp) {
      attention_commit(c, w.mtp->block, c.layers, s.mtp, keep, p0);
      const int64_t W = c.hc * c.hidden;
      DS4_CHECK(int64_t(s.cap_mtp_y.size()) == n * W, "deepseek_v4: commit_prefix: MTP rows out of step");
      s.mtp_last_y.assign(s.cap_mtp_y.begin() + (keep - 1) * W, s.cap_mtp_y.begin() + keep * W);
    }
    if (s.dspark_on) {
      const int64_t rows = std::min<int64_t>(s.cap_dspark_n0 + keep, c.window);
      for (size_t st = 0; st < s.dspark_ring.size(); ++st)
        tail_rows(s.cap_ring0[st], s.cap_ring_rows[st], keep, c.head_dim, rows, s.dspark_ring[st]);
      s.dspark_n = rows;
    }
    s.pos = p0 + keep;
  }
  capture_abort(s);  // drops every record
}

}  // namespace ds4::deepseek_v4
