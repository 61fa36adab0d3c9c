#include "ir/attr_decl.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

namespace nee {

const AttrDecl* AttrSchema::Find(const std::string& name) const {
  for (const AttrDecl& d : attrs)
    if (d.name == name) return &d;
  return nullptr;
}

const TypeConstraint* AttrSchema::FindConstraint(const std::string& letter) const {
  for (const TypeConstraint& c : constraints)
    if (c.letter == letter) return &c;
  return nullptr;
}

const FormalParam* AttrSchema::InputFormal(size_t index) const {
  if (index < inputs.size()) return &inputs[index];
  if (!inputs.empty() && inputs.back().option == FormalParam::Option::kVariadic) return &inputs.back();
  return nullptr;
}

const FormalParam* AttrSchema::OutputFormal(size_t index) const {
  if (index < outputs.size()) return &outputs[index];
  if (!outputs.empty() && outputs.back().option == FormalParam::Option::kVariadic) return &outputs.back();
  return nullptr;
}

std::string AttrSchema::Label() const {
  return (domain.empty() ? "" : domain + ".") + op + "-" + std::to_string(since_version);
}

namespace {
std::atomic<bool> g_audit{false};
std::mutex g_audit_mu;
std::set<std::string>& AuditLines() {
  static auto* lines = new std::set<std::string>();
  return *lines;
}
}  // namespace

void SetAttrDefaultAudit(bool on) { g_audit.store(on, std::memory_order_relaxed); }

std::vector<std::string> TakeAttrDefaultMismatches() {
  std::lock_guard<std::mutex> lock(g_audit_mu);
  std::vector<std::string> lines(AuditLines().begin(), AuditLines().end());
  AuditLines().clear();
  return lines;
}

// Called by Node::Get* (ir/graph.cc).
bool AttrDefaultAuditOn() { return g_audit.load(std::memory_order_relaxed); }
void RecordAttrDefaultMismatch(std::string line) {
  std::lock_guard<std::mutex> lock(g_audit_mu);
  AuditLines().insert(std::move(line));
}

}  // namespace nee
