// The operator registry: resolves (domain, op, model opset) to the schema
// entry in force. Families are listed once, in ops/op_families.def.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_schema.h"

namespace nee {

// The min_inputs and min_outputs of an entry registered without counts: its
// arity is what each version's declaration (ops/attr_spec.h) states, which
// the checker enforces (one entry may serve versions of different arity), so
// nee's own ops state their counts once, in the declaration. Entries with
// counts are ops without one (custom ops).
constexpr int kArityDeclared = -1;
inline bool ArityDeclared(const OpSchema& s) { return s.min_inputs == kArityDeclared; }

class OpRegistry {
 public:
  OpRegistry() = default;
  // A registry layered over `base` (which must outlive it): ops registered
  // here are found first, then base's. A session's custom ops
  // (ops/custom_ops.h) are such a layer over Global().
  explicit OpRegistry(const OpRegistry* base) : base_(base) {}

  // The registry with every family of ops/op_families.def registered.
  static const OpRegistry& Global();

  void Register(const OpSchema& schema);
  // Registers one entry per listed since-version, sharing rule and kernel,
  // whose arity is its declaration's (kArityDeclared).
  void RegisterVersions(const char* domain, const char* name, std::initializer_list<int> versions, ShapeFn infer,
                        KernelFn kernel);
  // The same with explicit counts, for an op without a declaration.
  void RegisterVersions(const char* domain, const char* name, std::initializer_list<int> versions,
                        int min_inputs, int max_inputs, int min_outputs, int max_outputs,
                        ShapeFn infer, KernelFn kernel);

  // The entry in force at `opset`: the one with the greatest since_version
  // not above it. Errors say whether the op is unknown or too new.
  Result<const OpSchema*> Resolve(const std::string& domain, const std::string& name, int64_t opset) const;
  bool Knows(const std::string& domain, const std::string& name) const;
  // Whether any op of `domain` is registered (here or in the base).
  bool KnowsDomain(const std::string& domain) const;

  size_t num_ops() const { return by_name_.size(); }
  // Registrations that repeated an existing (domain, op, since-version): two
  // families claiming one op. Global() must have none (a unit test checks).
  const std::vector<std::string>& duplicates() const { return duplicates_; }
  size_t num_entries() const;
  // Every (domain, name) with its since-versions (this layer only); for docs and tests.
  std::vector<std::pair<std::string, std::vector<int>>> List() const;

 private:
  const OpRegistry* base_ = nullptr;
  std::map<std::pair<std::string, std::string>, std::vector<OpSchema>> by_name_;
  std::vector<std::string> duplicates_;
};

// Declared by each family file (ops/<family>.cc).
#define NEE_OP_FAMILY(Family) void Register##Family##Ops(OpRegistry& registry);
#include "ops/op_families.def"
#undef NEE_OP_FAMILY

}  // namespace nee
