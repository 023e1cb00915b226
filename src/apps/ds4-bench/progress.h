#pragma once
// A one-line progress bar on stderr, drawn only when stderr is a terminal: piped or
// redirected output gets no carriage returns and no ANSI codes (logs stay clean).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace ds4::bench {

class Progress {
 public:
  // mode: "auto" (terminal only), "on", "off".
  explicit Progress(const std::string& mode = "auto")
      : enabled_(mode == "on" || (mode == "auto" && isatty(fileno(stderr)))) {}
  bool enabled() const { return enabled_; }

  void update(const std::string& label, int64_t done, int64_t total, bool force = false) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    if (total <= 0) {  // unknown length: elapsed time since construction
      const double s = std::chrono::duration<double>(now - t0_).count();
      std::fprintf(stderr, "\r[%6.1f s] %s\x1b[K", s, label.c_str());
      std::fflush(stderr);
      shown_ = true;
      return;
    }
    const int width = 28;
    const double frac = total > 0 ? double(done) / double(total) : 0.0;
    const int fill = int(frac * width + 0.5);
    std::string bar(size_t(fill), '#');
    bar.append(size_t(width - fill), '.');
    // \x1b[K clears the rest of a longer previous line.
    std::fprintf(stderr, "\r[%s] %lld/%lld %s\x1b[K", bar.c_str(), (long long)done, (long long)total, label.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  // Removes the bar so that a plain log line can follow.
  void clear() {
    if (!enabled_ || !shown_) return;
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace ds4::bench
