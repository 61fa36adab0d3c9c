#include "exec/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

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

// ONNX Runtime's "input_type_shape" entry of one value: {"float":[2,3]} for a
// tensor; other kinds by their description.
std::string TypeShapeJson(const Value* v) {
  if (!v || v->empty()) return "{}";
  if (!v->is_tensor()) return "{" + JsonString(v->Describe()) + ":[]}";
  std::string out = "{" + JsonString(DataTypeName(v->tensor().dtype())) + ":[";
  const std::vector<int64_t>& dims = v->tensor().dims();
  for (size_t d = 0; d < dims.size(); ++d) out += (d ? "," : "") + std::to_string(dims[d]);
  return out + "]}";
}

// The kernel thread's id as the system numbers it (what ONNX Runtime writes as "tid").
int64_t ThreadId() {
  thread_local const int64_t id = static_cast<int64_t>(::syscall(SYS_gettid));
  return id;
}

}  // namespace

Profiler::Profiler(Clock::time_point origin)
    : origin_(origin),
      start_time_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         (std::chrono::system_clock::now() - (Clock::now() - origin)).time_since_epoch())
                         .count()),
      pid_(static_cast<int64_t>(::getpid())) {}

int64_t Profiler::Us(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
}

void Profiler::Add(Event event) {
  if (events_.size() < kMaxEvents) events_.push_back(std::move(event));
}

void Profiler::RecordSession(const std::string& name, int64_t start_us, int64_t duration_us) {
  std::lock_guard<std::mutex> lock(mu_);
  Add({"Session", name, start_us, duration_us, ThreadId(), ""});
}

void Profiler::RecordNode(const Node& node, size_t index, const char* kernel, int64_t start_us, int64_t duration_us,
                          const std::vector<const Value*>& inputs, const std::vector<Value>& outputs,
                          int64_t prepare_us) {
  prepare_us = std::clamp<int64_t>(prepare_us, 0, duration_us);
  const std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  std::string in_shapes, out_shapes;
  for (const Value* v : inputs) in_shapes += (in_shapes.empty() ? "" : ",") + TypeShapeJson(v);
  for (const Value& v : outputs) out_shapes += (out_shapes.empty() ? "" : ",") + TypeShapeJson(&v);
  const int64_t thread = ThreadId();
  std::string args = "\"op_name\":" + JsonString(node.op_type) + ",\"domain\":" + JsonString(node.domain) +
                     ",\"node_index\":\"" + std::to_string(index) +
                     "\",\"provider\":\"CPUExecutionProvider\",\"kernel\":\"" + kernel +
                     "\",\"thread_id\":" + std::to_string(thread) + ",\"input_type_shape\":[" + in_shapes +
                     "],\"output_type_shape\":[" + out_shapes + "]";
  // An unnamed node is called "<op>_<index>", as ONNX Runtime names it.
  const std::string base = node.name.empty() ? node.op_type + "_" + std::to_string(index) : node.name;
  std::lock_guard<std::mutex> lock(mu_);
  if (prepare_us > 0) {
    Add({"Node", base + "_kernel_prepare", start_us, prepare_us, thread, args});
    AddToTotal(kPrepareTotal, prepare_us);
  }
  Add({"Node", base + "_kernel_time", start_us + prepare_us, duration_us - prepare_us, thread, std::move(args)});
  AddToTotal(op, duration_us - prepare_us);
}

void Profiler::AddToTotal(const std::string& op, int64_t us) {
  auto it = std::find_if(totals_.begin(), totals_.end(), [&](const OpTotal& t) { return t.op == op; });
  if (it == totals_.end()) it = totals_.insert(totals_.end(), OpTotal{op});
  ++it->calls;
  it->total_us += us;
}

std::string Profiler::ChromeTraceJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  out << "[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    out << "{\"cat\":\"" << e.category << "\",\"pid\":" << pid_ << ",\"tid\":" << e.thread << ",\"dur\":"
        << e.duration_us << ",\"ts\":" << e.start_us << ",\"ph\":\"X\",\"name\":" << JsonString(e.name)
        << ",\"args\":{" << e.args << "}}" << (i + 1 < events_.size() ? ",\n" : "\n");
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
