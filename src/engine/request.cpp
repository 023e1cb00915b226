#include "engine/request.h"

namespace ds4::engine {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::kNone: return "none";
    case Finish::kStop: return "stop";
    case Finish::kStopString: return "stop_string";
    case Finish::kLength: return "length";
    case Finish::kContext: return "context";
    case Finish::kCancelled: return "cancelled";
    case Finish::kError: return "error";
  }
  return "?";
}

std::optional<GenEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  GenEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestHandle::push(GenEvent ev) {
  {
    std::lock_guard lk(mu_);
    if (ev.kind == GenEvent::Kind::kDone || ev.kind == GenEvent::Kind::kError) done_ = true;
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

bool RequestHandle::finished() const {
  std::lock_guard lk(mu_);
  return done_;
}

}  // namespace ds4::engine
