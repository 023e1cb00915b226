#include "server/speculation_report.h"

namespace ds4::server {

nlohmann::json speculation_json(const engine::Engine& e) {
  const auto d = e.speculation_default();
  const auto& in = d.inputs;
  nlohmann::json j = {{"default", d.enabled}, {"source", d.source}, {"depth", e.speculative_depth()}};
  if (in.decode_s > 0) {
    j["cost_model"] = {{"decision", d.decision.enabled},
                       {"reason", d.decision.reason},
                       {"expected_speedup", d.decision.speedup},
                       {"tokens_per_cycle", d.decision.tokens_per_cycle},
                       {"break_even_acceptance", d.decision.break_even_acceptance},
                       {"acceptance", in.acceptance},
                       {"observed_drafted", in.observed_drafted},
                       {"observed_accepted", in.observed_accepted},
                       {"decode_ms", in.decode_s * 1e3},
                       {"verify_ms", in.verify_s * 1e3},
                       {"draft_ms", in.draft_s * 1e3},
                       {"commit_ms", in.commit_s * 1e3},
                       {"measured", in.source},
                       {"streams", e.decode_streams()}};  // the load the decision weighed
  }
  return j;
}

std::string speculation_receipt_line(const engine::Engine& e) {
  if (e.speculative_depth() <= 0) return "";
  const auto d = e.speculation_default();
  std::string line = "# speculative default: ";
  line += d.enabled ? "on" : "off";
  line += " (" + d.source;
  if (d.inputs.decode_s > 0) line += ": " + d.decision.reason;
  return line + ")\n";
}

}  // namespace ds4::server
