// ByteProgress (core/progress.h).
#include "core/progress.h"

#include <utility>

namespace ds4 {
namespace {

double mb(uint64_t b) { return double(b) / 1e6; }
double rate(uint64_t b, double s) { return s > 0 ? mb(b) / s : 0.0; }

}  // namespace

ByteProgress::ByteProgress(std::string what, const std::string& mode, bool tty, std::FILE* out, uint64_t quiet_below)
    : what_(std::move(what)), bar_(mode, tty, out), off_(mode == "off"), lines_(!bar_.enabled() && !off_), out_(out),
      quiet_below_(quiet_below) {}

void ByteProgress::update(uint64_t done, uint64_t total, double seconds) {
  if (off_ || total < quiet_below_ || total == 0) return;
  if (!lines_) {
    char label[160];
    std::snprintf(label, sizeof label, "MB %s, %.0f MB/s", what_.c_str(), rate(done, seconds));
    bar_.update(label, int64_t(mb(done)), int64_t(mb(total)), done == total);
    return;
  }
  // One line per 10% step crossed (the last step is finish()'s line).
  const int decile = int(done * 10 / total);
  if (decile <= last_decile_ || decile >= 10) return;
  last_decile_ = decile;
  std::fprintf(out_, "%s: %d%% (%.0f/%.0f MB, %.0f MB/s)\n", what_.c_str(), decile * 10, mb(done), mb(total),
               rate(done, seconds));
  std::fflush(out_);
}

void ByteProgress::finish(uint64_t total, double seconds, const std::string& note) {
  if (off_ || total < quiet_below_) return;
  bar_.clear();
  std::fprintf(out_, "%s: %.0f MB in %.1f s (%.0f MB/s)%s%s\n", what_.c_str(), mb(total), seconds, rate(total, seconds),
               note.empty() ? "" : ", ", note.c_str());
  std::fflush(out_);
}

}  // namespace ds4
