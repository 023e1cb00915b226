// Captured-prefix commit for GLM 5.x (the MTPLX capture_commit scheme of qwen_next, applied to
// this family's state; the row arithmetic is shared: models/capture_rows.h).
//   KDA   recurrent matrix after row keep-1 (captured for rows 0..n-2: with one MTP draft,
//         the 2-row verify, that is the single backup a rejection restores); conv window =
//         the last K-1 rows of [conv before the window ; conv input rows 0..keep-1]
//   MLA   append-only caches (latent, indexer keys and gates) truncated to the kept
//         positions; k-pool keys that the dropped rows completed are dropped
//   MTP   the head's queued (trunk row, next token) pairs of the dropped rows are dropped and
//         the trunk row of the last kept token becomes last_hidden; the head's own layer
//         history is untouched by a verify (it only advances while drafting)
#include "models/glm5/spec_commit.h"

#include <algorithm>

#include "core/error.h"
#include "models/capture_rows.h"

namespace ds4::glm5 {

void capture_begin(State& st) {
  if (!st.cap_tokens.empty()) throw Error("glm5: verify_capture over an uncommitted captured window");
  for (auto& k : st.kda) k.cap.on = !k.recurrent.empty();
}

void capture_end(State& st, std::span<const int32_t> tokens) {
  for (auto& k : st.kda) k.cap.on = false;  // the records stay until commit_captured_prefix
  st.cap_tokens.assign(tokens.begin(), tokens.end());
}

void capture_abort(State& st) {
  for (auto& k : st.kda) k.cap = KdaCapture{};
  st.cap_tokens.clear();
}

void commit_captured_prefix(const Config& c, State& st, int64_t keep) {
  const int64_t n = int64_t(st.cap_tokens.size());
  check_commit_keep("glm5", n, keep);
  const int64_t pos0 = st.pos - n;
  if (keep < n) {
    for (auto& k : st.kda) {
      if (k.cap.conv_in.empty()) continue;  // a DSA layer
      const int64_t sz = int64_t(k.recurrent.size());
      std::copy_n(k.cap.rec.begin() + (keep - 1) * sz, sz, k.recurrent.begin());
      tail_rows(k.cap.conv0, k.cap.conv_in, keep, int64_t(k.cap.conv_in.size()) / n, k.conv);
    }
    const int64_t kp = c.index_kpool;
    for (auto& m : st.mla) {
      // Caches of this layer hold a row per position, or none (KDA layers, shared indexers).
      for (PagedRows* rows : {&m.latent, &m.idx_keys, &m.idx_gates})
        if (!rows->empty()) rows->truncate(pos0 + keep);
      if (kp > 0) m.pool_keys.truncate(std::min(m.pool_keys.rows(), (pos0 + keep) / kp));
    }
    if (st.mtp_on)
      drop_pending_pairs(st.pending_hidden, st.pending_next, st.last_hidden, c.hidden_size, n - keep, "glm5");
    st.pos = pos0 + keep;
  }
  for (auto& k : st.kda) k.cap = KdaCapture{};
  st.cap_tokens.clear();
}

}  // namespace ds4::glm5
