#include "server/batch_metrics.h"

#include <cstdio>
#include <iterator>

#include "core/paged_rows.h"

namespace ds4::server {

std::string batch_metrics_text(const engine::EngineMetrics& m) {
  std::string out;
  auto one = [&](const char* name, const char* type, const char* help, double v) {
    char line[64];
    std::snprintf(line, sizeof line, "%.17g", v);
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + line + "\n";
  };
  one("ds4_running_batch_size", "gauge", "Sessions that took a decode step in the last engine iteration.",
      double(m.running));
  one("ds4_prefilling_sessions", "gauge", "Sessions fed a prefill slice in the last engine iteration.",
      double(m.prefilling));
  one("ds4_step_token_budget", "gauge", "Tokens one engine iteration may feed (0: no budget, batching off).",
      double(m.step_tokens));
  one("ds4_batched_decode_calls_total", "counter", "Batched decode forwards (each weight read once for the batch).",
      double(m.batched_calls));
  one("ds4_batched_decode_rows_total", "counter", "Sequences carried by batched decode forwards.",
      double(m.batched_rows));
  one("ds4_engine_iteration_seconds_total", "counter",
      "Wall time of the engine iterations that took decode steps (forwards, draws, scheduling, emitting).",
      m.iteration_seconds);
  one("ds4_batched_decode_seconds_total", "counter",
      "Time in batched decode forwards, their sampling candidates and rows included (the rest of an iteration is host work).",
      m.batched_decode_seconds);
  one("ds4_state_memory_bytes", "gauge", "Bytes the live sessions' model states hold (the prefix cache: ds4_cache_bytes).",
      double(m.state_bytes));
  // The real memory of the per-position caches: blocks shared by a cached prefix and the
  // sessions continuing from it count once here, once per holder in the two gauges above.
  one("ds4_paged_cache_bytes", "gauge",
      "Bytes of paged per-position cache blocks alive (CPU states, prefix cache, snapshots), shared blocks once.",
      double(PagedRows::live_block_bytes()));
  one("ds4_state_memory_budget_bytes", "gauge", "Bytes the live states and the prefix cache may hold together (admission control).",
      double(m.state_budget_bytes));
  one("ds4_preemptions_total", "counter", "Turns preempted to stay within the state memory budget (state recomputed or swapped to host).",
      double(m.preemptions));
  one("ds4_swap_outs_total", "counter", "Preemptions that swapped the state to host memory (the rest recomputed).",
      double(m.swap_outs));
  one("ds4_swapped_bytes", "gauge", "Host bytes the swapped states of preempted turns hold while they wait.",
      double(m.swapped_bytes));
  one("ds4_swap_budget_bytes", "gauge", "Host bytes swapped states may hold together (0: preemption recomputes).",
      double(m.swap_budget_bytes));
  one("ds4_batched_verify_calls_total", "counter",
      "Batched speculative verify forwards (every speculating session's window, weights read once).",
      double(m.batched_verify_calls));
  one("ds4_batched_verify_rows_total", "counter", "Verify-window rows carried by batched verify forwards.",
      double(m.batched_verify_rows));
  one("ds4_batched_prefill_calls_total", "counter",
      "Batched prefill forwards (the prompt slices of several sessions in one pass, weights read once).",
      double(m.batched_prefill_calls));
  one("ds4_batched_prefill_sequences_total", "counter", "Sessions fed by batched prefill forwards.",
      double(m.batched_prefill_sequences));
  one("ds4_batch_rows_bytes", "gauge", "Bytes the batched verify / decode logits rows hold between iterations.",
      double(m.batch_rows_bytes));
  const char* name = "ds4_decode_batch_size";
  out += std::string("# HELP ") + name + " Decode steps per engine iteration.\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  char line[160];
  for (size_t i = 0; i < std::size(engine::EngineMetrics::kBatchBounds); ++i) {
    cum += m.decode_steps_by_size[i];
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%lld\"} %llu\n", name,
                  (long long)engine::EngineMetrics::kBatchBounds[i], (unsigned long long)cum);
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %llu\n%s_count %llu\n", name,
                (unsigned long long)m.decode_iterations, name, (unsigned long long)m.decode_sequences, name,
                (unsigned long long)m.decode_iterations);
  return out + line;
}

}  // namespace ds4::server
