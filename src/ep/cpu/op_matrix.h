// The compatibility matrix: what this build runs, op by op, and with which
// CPU kernels. Read from the op registry (ops/) and the optimized-kernel table
// (ep/cpu/cpu_kernels.cc), never kept by hand: `nee ops` prints it as
// Markdown or JSON and docs/operators.md is its Markdown.
#pragma once
#include <string>
#include <vector>

namespace nee::cpu {

// A range of opset versions of the op's domain, both ends included.
struct OpsetRange {
  int first = 0;
  int last = 0;
};

// One schema entry of an op: in force from `since` to `until`.
struct OpVersionSupport {
  int since = 0;
  int until = 0;           // the next entry's since - 1, or the newest opset nee supports
  bool reference = false;  // a reference kernel runs it (ops/<family>.cc)
  bool optimized = false;  // an optimized CPU kernel is picked for it (ep/cpu)
};

struct OpSupport {
  std::string domain;  // "ai.onnx" for the default domain
  std::string op;
  std::vector<OpVersionSupport> versions;  // by since-version
  // The registry declares no type constraints yet (ops/op_schema.h), so the
  // reference kernels' element types are not known here; each reports the
  // types it lacks with an error naming the node.
  // Element types the optimized kernel computes itself (others fall back to
  // the reference); empty when there is no optimized kernel.
  std::string optimized_types;

  // The opsets whose entries have the kernel, adjacent entries merged.
  std::vector<OpsetRange> ReferenceOpsets() const;
  std::vector<OpsetRange> OptimizedOpsets() const;
};

// Every registered (domain, op), sorted by domain (ai.onnx first) then op;
// only `domain`'s when it is not empty ("ai.onnx" or "" name the default one).
std::vector<OpSupport> CompatibilityMatrix(const std::string& domain = "");

// The domains the registry knows, in the matrix's order.
std::vector<std::string> MatrixDomains();

}  // namespace nee::cpu
