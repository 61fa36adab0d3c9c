// "[#######.............]  7/20 warmup": a progress bar on one line of
// stderr, redrawn in place, drawn only when stderr is a terminal. Used by
// `nee bench` (its runs) and the calibration of `nee quantize --mode static`
// (its samples). The line is wiped by Clear() or when the bar goes away.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace nee {

class ProgressBar {
 public:
  explicit ProgressBar(bool wanted = true) : enabled_(wanted && isatty(STDERR_FILENO) == 1) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { Clear(); }

  void Show(const char* phase, int64_t done, int64_t total) {
    if (!enabled_ || total <= 0) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    std::fprintf(stderr, "\r[%s%s] %lld/%lld %s", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), phase);
    std::fflush(stderr);
    drawn_ = true;
  }
  // Wipes the line, if a bar is on it.
  void Clear() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace nee
