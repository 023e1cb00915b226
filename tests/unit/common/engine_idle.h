#pragma once
// The done events go out inside the engine's iteration; the finished sessions leave the live
// set (and drop their states) at its end. Waits for that, bounded (10 s; not a timing check:
// the caller asserts on the metrics it returns).
#include <chrono>
#include <thread>

#include "engine/engine.h"

namespace ds4::engine {

inline EngineMetrics wait_until_idle(const Engine& e) {
  using namespace std::chrono_literals;
  for (int i = 0; i < 2000 && e.metrics().live > 0; ++i) std::this_thread::sleep_for(5ms);
  return e.metrics();
}

}  // namespace ds4::engine
