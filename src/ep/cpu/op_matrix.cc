#include "ep/cpu/op_matrix.h"

#include <algorithm>

#include "check/checker.h"
#include "ep/cpu/cpu_kernels.h"
#include "ops/op_registry.h"

namespace nee::cpu {

namespace {

std::string DisplayDomain(const std::string& normalized) { return normalized.empty() ? "ai.onnx" : normalized; }

// The default domain first, then the others by name.
bool DomainBefore(const std::string& a, const std::string& b) {
  if (a.empty() != b.empty()) return a.empty();
  return a < b;
}

std::vector<OpsetRange> Ranges(const std::vector<OpVersionSupport>& versions, bool OpVersionSupport::*flag) {
  std::vector<OpsetRange> ranges;
  for (const OpVersionSupport& v : versions) {
    if (!(v.*flag)) continue;
    if (!ranges.empty() && ranges.back().last + 1 == v.since) ranges.back().last = v.until;
    else ranges.push_back({v.since, v.until});
  }
  return ranges;
}

// Every registered (normalized domain, op) with its since-versions.
struct Registered {
  std::string domain, op;
  std::vector<int> versions;
};

std::vector<Registered> RegisteredOps() {
  std::vector<Registered> ops;
  for (auto& [label, versions] : OpRegistry::Global().List()) {
    // "domain.Op" ("Op" for ai.onnx): op names hold no dot, domains may.
    const size_t dot = label.rfind('.');
    if (dot == std::string::npos) ops.push_back({"", label, versions});
    else ops.push_back({label.substr(0, dot), label.substr(dot + 1), versions});
  }
  return ops;
}

}  // namespace

std::vector<OpsetRange> OpSupport::ReferenceOpsets() const { return Ranges(versions, &OpVersionSupport::reference); }
std::vector<OpsetRange> OpSupport::OptimizedOpsets() const { return Ranges(versions, &OpVersionSupport::optimized); }

std::vector<OpSupport> CompatibilityMatrix(const std::string& domain) {
  const std::string wanted = domain == "ai.onnx" ? "" : NormalizeDomain(domain);
  std::vector<OpSupport> matrix;
  for (const Registered& r : RegisteredOps()) {
    if (!domain.empty() && r.domain != wanted) continue;
    OpSupport op;
    op.domain = DisplayDomain(r.domain);
    op.op = r.op;
    // The last entry is in force up to the newest opset the checker admits
    // for the domain (a domain it does not limit: the entry's own version).
    const int newest = static_cast<int>(NewestSupportedOpset(r.domain));
    for (size_t i = 0; i < r.versions.size(); ++i) {
      Result<const OpSchema*> entry = OpRegistry::Global().Resolve(r.domain, r.op, r.versions[i]);
      if (!entry.ok()) continue;  // cannot happen: the version was just listed
      OpVersionSupport v;
      v.since = r.versions[i];
      v.until = i + 1 < r.versions.size() ? r.versions[i + 1] - 1 : std::max(newest, v.since);
      v.reference = entry.value()->kernel != nullptr;
      const OptimizedKernel* fast = FindOptimizedKernel(*entry.value());
      v.optimized = fast != nullptr;
      if (fast && fast->types) op.optimized_types = fast->types;
      op.versions.push_back(v);
    }
    matrix.push_back(std::move(op));
  }
  std::stable_sort(matrix.begin(), matrix.end(), [](const OpSupport& a, const OpSupport& b) {
    const std::string da = a.domain == "ai.onnx" ? "" : a.domain, db = b.domain == "ai.onnx" ? "" : b.domain;
    if (da != db) return DomainBefore(da, db);
    return a.op < b.op;
  });
  return matrix;
}

std::vector<std::string> MatrixDomains() {
  std::vector<std::string> domains;
  for (const Registered& r : RegisteredOps())
    if (std::find(domains.begin(), domains.end(), r.domain) == domains.end()) domains.push_back(r.domain);
  std::sort(domains.begin(), domains.end(), DomainBefore);
  for (std::string& d : domains) d = DisplayDomain(d);
  return domains;
}

}  // namespace nee::cpu
