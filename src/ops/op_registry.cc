#include "ops/op_registry.h"

#include <algorithm>

namespace nee {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
#define NEE_OP_FAMILY(Family) Register##Family##Ops(*r);
#include "ops/op_families.def"
#undef NEE_OP_FAMILY
    return r;
  }();
  return *registry;
}

void OpRegistry::Register(const OpSchema& schema) {
  auto& entries = by_name_[{NormalizeDomain(schema.domain), schema.name}];
  // A later registration of the same since-version replaces the earlier one.
  for (OpSchema& e : entries) {
    if (e.since_version == schema.since_version) {
      duplicates_.push_back(std::string(schema.domain) + "." + schema.name + "-" + std::to_string(schema.since_version));
      e = schema;
      return;
    }
  }
  entries.push_back(schema);
  std::sort(entries.begin(), entries.end(),
            [](const OpSchema& a, const OpSchema& b) { return a.since_version < b.since_version; });
}

void OpRegistry::RegisterVersions(const char* domain, const char* name, std::initializer_list<int> versions,
                                  int min_inputs, int max_inputs, int min_outputs, int max_outputs,
                                  ShapeFn infer, KernelFn kernel) {
  for (int v : versions)
    Register(OpSchema{domain, name, v, min_inputs, max_inputs, min_outputs, max_outputs, infer, kernel});
}

void OpRegistry::RegisterVersions(const char* domain, const char* name, std::initializer_list<int> versions,
                                  ShapeFn infer, KernelFn kernel) {
  for (int v : versions)
    Register(OpSchema{domain, name, v, kArityDeclared, kVariadic, kArityDeclared, kVariadic, infer, kernel});
}

Result<const OpSchema*> OpRegistry::Resolve(const std::string& domain, const std::string& name,
                                            int64_t opset) const {
  std::string d = NormalizeDomain(domain);
  auto it = by_name_.find({d, name});
  if (it == by_name_.end() && base_ && base_->Knows(d, name)) return base_->Resolve(d, name, opset);
  std::string label = (d.empty() ? "" : d + ".") + name;
  if (it == by_name_.end()) {
    const OpRegistry* builtin = this;
    while (builtin->base_) builtin = builtin->base_;
    if (d.empty() || builtin->KnowsDomain(d)) return NotImplemented("operator " + label + " is not supported by nee");
    // A domain nee does not implement: a custom op the session lacks.
    return NotImplemented("operator '" + name + "' of domain '" + d + "' is not registered: " +
                          (KnowsDomain(d) ? "the session's custom ops of that domain do not include it"
                                          : "nee has no operator of that domain") +
                          ". A custom op is registered for a session by a custom-op library "
                          "(SessionOptions.register_custom_ops_library, nee_session_options_add_custom_ops_library, "
                          "nee run --custom-ops LIB) or in-process (SessionOptions.register_custom_op, "
                          "nee_session_options_add_custom_op)");
  }
  const OpSchema* found = nullptr;
  for (const OpSchema& e : it->second)
    if (e.since_version <= opset) found = &e;
  if (!found)
    return InvalidModel("operator " + label + " does not exist at opset " + std::to_string(opset) +
                        " (introduced in opset " + std::to_string(it->second.front().since_version) + ")");
  return found;
}

bool OpRegistry::Knows(const std::string& domain, const std::string& name) const {
  return by_name_.count({NormalizeDomain(domain), name}) > 0 || (base_ && base_->Knows(domain, name));
}

bool OpRegistry::KnowsDomain(const std::string& domain) const {
  const std::string d = NormalizeDomain(domain);
  auto it = by_name_.lower_bound({d, std::string()});
  return (it != by_name_.end() && it->first.first == d) || (base_ && base_->KnowsDomain(d));
}

size_t OpRegistry::num_entries() const {
  size_t n = 0;
  for (const auto& [key, entries] : by_name_) n += entries.size();
  return n;
}

std::vector<std::pair<std::string, std::vector<int>>> OpRegistry::List() const {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (const auto& [key, entries] : by_name_) {
    std::vector<int> versions;
    for (const OpSchema& e : entries) versions.push_back(e.since_version);
    out.emplace_back((key.first.empty() ? "" : key.first + ".") + key.second, versions);
  }
  return out;
}

}  // namespace nee
