#pragma once
// Continuous batching in /metrics (Prometheus text): the running batch (gauges), the
// histogram of decode steps per engine iteration, and the batched-forward counters, from
// EngineMetrics (engine/engine.h). Queue depth is ds4_queue_depth (server.cpp); per-stream
// rates are TurnMetrics' ds4_stream_decode_tokens_per_second.
#include <string>

#include "engine/engine.h"

namespace ds4::server {

std::string batch_metrics_text(const engine::EngineMetrics& m);

}  // namespace ds4::server
