#include "exec/run_control.h"

#include <unistd.h>

namespace nee {

namespace {
std::string Mib(int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }
}  // namespace

Status MemoryBudget::Reserve(int64_t bytes) {
  int64_t now = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (limit_ > 0 && now > limit_) {
    live_.fetch_sub(bytes, std::memory_order_relaxed);
    return OutOfMemory(std::string(what_) + " would take " + Mib(now) + " (" + Mib(bytes) + " requested, " +
                       Mib(now - bytes) + " live), over its memory limit of " + Mib(limit_) + " (" + limit_name_ + ")");
  }
  if (parent_) {
    if (Status fits = parent_->Reserve(bytes); !fits.ok()) {
      live_.fetch_sub(bytes, std::memory_order_relaxed);
      return fits;
    }
  }
  return Status::Ok();
}

RunControl::RunControl(const std::atomic<bool>* terminate, int64_t timeout_ms)
    : terminate_(terminate), timeout_ms_(timeout_ms) {
  if (timeout_ms_ > 0) deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
}

Status RunControl::Check() const {
  if (terminate_ && terminate_->load(std::memory_order_relaxed))
    return Cancelled("the run was terminated by the caller (RunOptions terminate flag)");
  if (timeout_ms_ > 0 && std::chrono::steady_clock::now() > deadline_)
    return Cancelled("the run exceeded its time limit of " + std::to_string(timeout_ms_) + " ms");
  return Status::Ok();
}

int64_t DefaultRunMemoryLimit() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * page_size;
}

}  // namespace nee
