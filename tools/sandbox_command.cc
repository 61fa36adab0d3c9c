// `nee run --sandbox`: the model is read, checked and run in a child process
// confined by base/sandbox.h; the child sends the outputs back as ONNX
// protobuf bytes and this process, which never parses the model, writes
// them as an unconfined run would.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "tools/cli_common.h"
#include "base/sandbox.h"

namespace nee_cli {
namespace {

using nee::EnterSandboxStage;
using nee::MessageReader;
using nee::MessageWriter;
using nee::RunInSandbox;
using nee::SandboxLimits;
using nee::SandboxReply;
using nee::SandboxStage;

// The reply: double ms, then length-prefixed notes, then the output count and
// per output its name, kind (nee_value_kind_t) and serialized bytes. Lengths
// and counts are uint64.
[[noreturn]] void MalformedReply() {
  throw neeapi::Error(NEE_STATUS_RUNTIME_ERROR, "the sandboxed process sent a malformed reply");
}

std::string SerializeOutcome(const RunOutcome& r) {
  MessageWriter w;
  w.Raw(&r.ms, sizeof r.ms);
  w.Text(r.notes);
  w.U64(r.outputs.size());
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    w.Text(i < r.names.size() ? r.names[i] : "");
    w.U64(static_cast<uint64_t>(nee_value_kind(r.outputs[i].get())));
    size_t size = 0;
    neeapi::Check(nee_value_serialize(r.outputs[i].get(), nullptr, 0, &size));
    w.U64(size);
    std::string& bytes = w.bytes();
    const size_t at = bytes.size();
    bytes.resize(at + size);
    neeapi::Check(nee_value_serialize(r.outputs[i].get(), bytes.data() + at, size, &size));
  }
  return std::move(w.bytes());
}

RunOutcome ParseOutcome(const std::string& bytes) {
  MessageReader in(bytes);
  RunOutcome r;
  in.Raw(&r.ms, sizeof r.ms);
  r.notes = in.Text();
  const uint64_t count = in.Count();
  if (!in.ok()) MalformedReply();
  for (uint64_t i = 0; i < count; ++i) {
    r.names.push_back(in.Text());
    const uint64_t kind = in.U64();
    const std::string value = in.Text();
    if (!in.ok()) MalformedReply();
    nee_value_t* v = nullptr;
    // The same reader as for .pb input files; a malformed value is an error.
    neeapi::Check(nee_value_deserialize(value.data(), value.size(), static_cast<int32_t>(std::min<uint64_t>(kind, 99)), &v));
    r.outputs.emplace_back(v);
  }
  if (!in.done()) MalformedReply();
  return r;
}

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

SandboxLimits LimitsFor(const Args& a) {
  SandboxLimits limits;
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t physical = sysconf(_SC_PHYS_PAGES) * page;
  const int64_t cores = std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
  const int64_t threads = a.threads > 0 ? a.threads : cores;
  // Tensors (the run's memory limit, else physical memory), the mapped model,
  // and per thread its stack and allocator arena reservations, plus code.
  const int64_t tensors = a.memory_limit > 0 ? a.memory_limit : physical;
  limits.address_space_bytes = nee::SandboxAddressSpace(tensors, FileSize(a.model), threads);
  // CPU time of all threads; the run's own --timeout stops it cleanly first.
  // Without --timeout, an hour (a valid model may loop as long as it says).
  const int64_t runs = 1 + a.repeat;
  if (a.timeout_ms > 0) {
    limits.cpu_seconds = 30 + threads * runs * ((a.timeout_ms + 999) / 1000);
    limits.wall_ms = 60000 + 2 * runs * a.timeout_ms;
  } else {
    limits.cpu_seconds = 3600;
  }
  return limits;
}

}  // namespace

RunOutcome ComputeRunSandboxed(const Args& a) {
  SandboxReply reply = RunInSandbox(LimitsFor(a), [&]() -> SandboxReply {
    try {
      // The model, its external data and the input files are read in the
      // loading stage; the runs happen with no file access at all.
      RunOutcome r = ComputeRun(a, [] {
        std::string error;
        if (!EnterSandboxStage(SandboxStage::kRunning, &error))
          throw neeapi::Error(NEE_STATUS_RUNTIME_ERROR, "sandbox: " + error);
      });
      return {NEE_STATUS_OK, SerializeOutcome(r)};
    } catch (const neeapi::Error& e) {
      return {e.code(), e.what()};
    }
  });
  if (reply.code != NEE_STATUS_OK) throw neeapi::Error(static_cast<nee_status_code_t>(reply.code), reply.bytes);
  return ParseOutcome(reply.bytes);
}

}  // namespace nee_cli
