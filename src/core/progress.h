#pragma once
// Progress on stderr. Progress: a one-line bar drawn only when the stream is a terminal:
// piped or redirected output gets no carriage returns and no ANSI codes (logs stay clean).
// ByteProgress: a long byte count (weights to the GPU) with MB/s: the bar on a terminal, a
// plain line every 10% otherwise, so a log still shows that the load moves.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <unistd.h>

namespace ds4 {

class Progress {
 public:
  // mode: "auto" (terminal only), "on", "off".
  explicit Progress(const std::string& mode = "auto") : Progress(mode, isatty(fileno(stderr)) != 0, stderr) {}
  // `tty`: whether `out` is a terminal (the tests pass a file and say which it stands for).
  Progress(const std::string& mode, bool tty, std::FILE* out) : enabled_(mode == "on" || (mode == "auto" && tty)), out_(out) {}
  bool enabled() const { return enabled_; }

  void update(const std::string& label, int64_t done, int64_t total, bool force = false) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    if (total <= 0) {  // unknown length: elapsed time since construction
      const double s = std::chrono::duration<double>(now - t0_).count();
      std::fprintf(out_, "\r[%6.1f s] %s\x1b[K", s, label.c_str());
      std::fflush(out_);
      shown_ = true;
      return;
    }
    const int width = 28;
    const double frac = total > 0 ? double(done) / double(total) : 0.0;
    const int fill = int(frac * width + 0.5);
    std::string bar(size_t(fill), '#');
    bar.append(size_t(width - fill), '.');
    // \x1b[K clears the rest of a longer previous line.
    std::fprintf(out_, "\r[%s] %lld/%lld %s\x1b[K", bar.c_str(), (long long)done, (long long)total, label.c_str());
    std::fflush(out_);
    shown_ = true;
  }
  // Removes the bar so that a plain log line can follow.
  void clear() {
    if (!enabled_ || !shown_) return;
    std::fputs("\r\x1b[K", out_);
    std::fflush(out_);
    shown_ = false;
  }

 private:
  bool enabled_;
  std::FILE* out_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// "what: 30% (1703/5678 MB, 4210 MB/s)" lines (MB = 1e6 bytes). Loads below `quiet_below`
// bytes print nothing (a tiny test model would add a line per load to every test log).
class ByteProgress {
 public:
  static constexpr uint64_t kQuietBelow = uint64_t(1) << 30;
  explicit ByteProgress(std::string what, const std::string& mode = "auto", uint64_t quiet_below = kQuietBelow)
      : ByteProgress(std::move(what), mode, isatty(fileno(stderr)) != 0, stderr, quiet_below) {}
  ByteProgress(std::string what, const std::string& mode, bool tty, std::FILE* out, uint64_t quiet_below = kQuietBelow);

  // `seconds` since the load started (the caller's clock: the tests pass their own).
  void update(uint64_t done, uint64_t total, double seconds);
  // The closing line, "what: 5678 MB in 1.3 s (4210 MB/s)" plus `note` when not empty; also
  // when the bar is off, unless the load is quiet.
  void finish(uint64_t total, double seconds, const std::string& note = "");

 private:
  std::string what_;
  Progress bar_;
  bool off_;    // mode "off"
  bool lines_;  // not a terminal: plain lines
  std::FILE* out_;
  uint64_t quiet_below_;
  int last_decile_ = 0;
};

}  // namespace ds4
