#include "apps/ds4server/app_model.h"

#include <thread>

#include "engine/tok_codec.h"
#include "models/model.h"

namespace ds4::cli {

server::Loaded load_for_settings(const engine::Settings& s) {
  LoadOptions o;
  // power scales the thread count (SPEC §4); 0 threads = all cores.
  int threads = s.threads > 0 ? s.threads : int(std::thread::hardware_concurrency());
  o.threads = std::max(1, threads * s.power / 100);
  o.max_context = s.context_size;
  server::Loaded l;
  l.model = load_model(s.model, o);
  l.codec = engine::TokCodec::open(s.model, l.model->info().family);
  return l;
}

}  // namespace ds4::cli
