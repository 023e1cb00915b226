// The GPU canary's stall rule applied to turns (SPEC §6): a probe that waited longer than
// the canary's stall_s means some GPU work monopolised the device; every turn that was live
// while it happened ends with an error (the server keeps serving the next requests).
#include <cstdio>
#include <string>

#include "engine/engine.h"
#include "engine/engine_job.h"

namespace ds4::engine {

void Engine::check_canary() {
  if (!canary_) return;
  for (auto& j : live_) {
    Job& job = *j;
    if (job.phase == Job::Phase::kDone || !job.canary_mark || !canary_->stalled_since(*job.canary_mark)) continue;
    const CanaryStats s = canary_->snapshot(*job.canary_mark);
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "GPU stall: a canary probe waited more than %.1f s for the GPU during this turn (probes "
                  "completed in the turn: %lld, max %.1f ms); the turn was aborted",
                  canary_->stall_s(), (long long)s.samples, s.max_ms);
    std::fprintf(stderr, "gpu canary: %s\n", msg);
    GenEvent e = error_event(msg);
    e.usage = job.usage;
    e.usage.gpu_canary = s;
    job.handle->push(std::move(e));
    // The state is not published: the turn did not finish.
    job.phase = Job::Phase::kDone;
    job.state.reset();
    std::lock_guard lk(metrics_mu_);
    m_.requests_failed++;
    m_.canary_aborts++;
  }
}

}  // namespace ds4::engine
