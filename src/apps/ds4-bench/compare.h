#pragma once
// --compare CMD: run a peer benchmark in the same run, read its CSV (ds4-bench columns:
// ctx_tokens, prefill_tps, gen_tps) and put ours / peer ratios side by side.
#include <map>
#include <string>
#include <vector>

#include "apps/ds4-bench/sweep.h"

namespace ds4::bench {

struct PeerRow {
  double prefill_tps = 0, gen_tps = 0;
};

// CSV text with a header naming ctx_tokens, prefill_tps and gen_tps (other columns and any
// order allowed; '#' lines skipped). Throws InputError naming `source` and the column/line.
std::map<int64_t, PeerRow> parse_peer_csv(const std::string& text, const std::string& source);

// Substitutes {ctx_start} {ctx_max} {step_incr} {gen_tokens} {prompt_file} {model} {csv} in
// cmd, runs it with /bin/sh, returns the CSV: the file {csv} named, else the command's stdout.
std::string run_peer(const std::string& cmd, const std::map<std::string, std::string>& vars);

// Ratio table as CSV (ratio = ours / peer; empty where the peer has no row for a context).
std::string ratio_csv(const std::vector<Row>& ours, const std::map<int64_t, PeerRow>& peer);

}  // namespace ds4::bench
