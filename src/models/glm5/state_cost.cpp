#include "models/glm5/state_cost.h"

namespace ds4::glm5 {
namespace {
// Floats one position adds to a DSA layer's MlaState: its latent row, and on a layer with
// its own indexer the key and gate rows plus 1/kpool of a finished pool key.
double dsa_floats_per_token(const Config& c, const LayerWeights& l) {
  if (l.kind == LayerKind::kLinear) return 0;  // KDA: fixed conv window + recurrent matrix
  double f = double(c.kv_lora_rank);
  if (l.mla.has_indexer) f += 2.0 * double(c.index_head_dim) + double(c.index_head_dim) / double(c.index_kpool);
  return f;
}
}  // namespace

StateCost state_cost(const Config& c, const Weights& w, StateCost fresh, bool draft) {
  double per = 0;
  for (const LayerWeights& l : w.layers) per += dsa_floats_per_token(c, l);
  double fixed = 0;
  if (draft && w.mtp) {
    // The head's own layer history, and the trunk rows queued for it until its next draft
    // (a prompt's rows wait until the turn's first draft): both bounded together.
    per += dsa_floats_per_token(c, w.mtp->layer) + double(c.hidden_size);
    fixed += double(c.hidden_size);  // last_hidden: the trunk's last normed row
  }
  return {fresh.fixed + fixed * sizeof(float), fresh.per_token + per * sizeof(float)};
}

}  // namespace ds4::glm5
