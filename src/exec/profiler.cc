#include "exec/profiler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace nee {

namespace {

// A JSON string literal for `s` (names come from the model file).
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

Profiler::Profiler()
    : origin_(std::chrono::steady_clock::now()),
      start_time_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count()) {}

int64_t Profiler::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin_).count();
}

void Profiler::Record(const Node& node, const char* kernel, int64_t start_us, int64_t duration_us) {
  const std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() < kMaxEvents)
    events_.push_back({node.name, op, kernel, start_us, duration_us,
                       std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0xffff});
  auto it = std::find_if(totals_.begin(), totals_.end(), [&](const OpTotal& t) { return t.op == op; });
  if (it == totals_.end()) it = totals_.insert(totals_.end(), OpTotal{op});
  ++it->calls;
  it->total_us += duration_us;
}

std::string Profiler::ChromeTraceJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  out << "[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    out << "{\"cat\":\"Node\",\"ph\":\"X\",\"pid\":1,\"tid\":" << e.thread << ",\"ts\":" << e.start_us
        << ",\"dur\":" << e.duration_us << ",\"name\":" << JsonString(e.name.empty() ? e.op : e.name)
        << ",\"args\":{\"op_name\":" << JsonString(e.op) << ",\"kernel\":\"" << e.kernel << "\"}}"
        << (i + 1 < events_.size() ? ",\n" : "\n");
  }
  out << "]\n";
  return out.str();
}

std::string Profiler::Summary() const {
  std::vector<OpTotal> totals;
  {
    std::lock_guard<std::mutex> lock(mu_);
    totals = totals_;
  }
  std::sort(totals.begin(), totals.end(), [](const OpTotal& a, const OpTotal& b) { return a.total_us > b.total_us; });
  int64_t all_us = 0;
  for (const OpTotal& t : totals) all_us += t.total_us;
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-32s %8s %12s %7s %12s\n", "op", "calls", "total ms", "share", "mean us");
  out << line;
  for (const OpTotal& t : totals) {
    std::snprintf(line, sizeof line, "%-32s %8lld %12.3f %6.1f%% %12.1f\n", t.op.c_str(),
                  static_cast<long long>(t.calls), t.total_us / 1000.0,
                  all_us ? 100.0 * static_cast<double>(t.total_us) / static_cast<double>(all_us) : 0.0,
                  t.calls ? static_cast<double>(t.total_us) / static_cast<double>(t.calls) : 0.0);
    out << line;
  }
  return out.str();
}

Status Profiler::WriteTrace(const std::string& path) const {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return InvalidArgument("cannot write the profile to '" + path + "'");
  file << ChromeTraceJson();
  if (!file.good()) return RuntimeError("writing the profile to '" + path + "' failed");
  return Status::Ok();
}

}  // namespace nee
