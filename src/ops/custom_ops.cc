#include "ops/custom_ops.h"

#include <new>

// What a library's nee_register_custom_ops registers into: the ops made so
// far, in the order registered, and the first error.
struct nee_custom_op_registry {
  std::shared_ptr<nee::SharedLibrary> library;
  std::string origin;
  std::vector<std::shared_ptr<const nee::CustomOp>> ops;
  std::string error;
  bool open = true;  // only during the entry point
};

namespace nee {

namespace {

std::string Text(const char* s) { return s ? std::string(s) : std::string(); }

// The arity of a definition as the registry takes it (kVariadic for no bound).
int MaxArity(int32_t max) { return max < 0 || max >= kVariadic ? kVariadic : max; }

Status CheckDef(const nee_custom_op_def& def, const std::string& origin) {
  const std::string what = "custom op " + (def.domain ? Text(def.domain) : "?") + "." +
                           (def.op_type ? Text(def.op_type) : "?") + " (" + origin + "): ";
  if (def.struct_size != sizeof(nee_custom_op_def))
    return InvalidArgument(what + "nee_custom_op_def.struct_size is " + std::to_string(def.struct_size) +
                           ", expected " + std::to_string(sizeof(nee_custom_op_def)) +
                           " (built against another include/nee/custom_op.h?)");
  if (!def.domain || !*def.domain) return InvalidArgument(what + "the domain is empty");
  if (!def.op_type || !*def.op_type) return InvalidArgument(what + "the op type is empty");
  if (def.since_version < 1)
    return InvalidArgument(what + "since_version must be 1 or more, got " + std::to_string(def.since_version));
  if (def.min_inputs < 0 || (def.max_inputs != NEE_CUSTOM_OP_VARIADIC && def.max_inputs < def.min_inputs))
    return InvalidArgument(what + "bad input arity " + std::to_string(def.min_inputs) + ".." +
                           std::to_string(def.max_inputs));
  if (def.min_outputs < 0 || (def.max_outputs != NEE_CUSTOM_OP_VARIADIC && def.max_outputs < def.min_outputs) ||
      def.max_outputs == 0)
    return InvalidArgument(what + "bad output arity " + std::to_string(def.min_outputs) + ".." +
                           std::to_string(def.max_outputs) + " (an op has at least one output)");
  if (!def.compute) return InvalidArgument(what + "no compute function");
  if (IsBuiltinDomain(def.domain))
    return InvalidArgument(what + "nee implements the domain '" + Text(def.domain) +
                           "' itself; give custom ops a domain of their own");
  if (OpRegistry::Global().Knows(def.domain, def.op_type))
    return InvalidArgument(what + "nee implements this op itself; custom ops cannot replace nee's");
  return Status::Ok();
}

}  // namespace

bool IsBuiltinDomain(const std::string& domain) {
  static const char* const kBuiltin[] = {"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training",
                                         "ai.nee"};
  for (const char* d : kBuiltin)
    if (domain == d) return true;
  return false;
}

Result<std::shared_ptr<const CustomOp>> CustomOp::Make(const nee_custom_op_def& def,
                                                       std::shared_ptr<SharedLibrary> library, std::string origin) {
  NEE_RETURN_IF_ERROR(CheckDef(def, origin));
  std::shared_ptr<CustomOp> op(new CustomOp());
  op->domain_ = def.domain;
  op->op_type_ = def.op_type;
  op->origin_ = std::move(origin);
  op->library_ = std::move(library);
  op->def_ = def;  // last: from here on, the op owns user_data (released by ~CustomOp)
  op->def_.domain = op->domain_.c_str();
  op->def_.op_type = op->op_type_.c_str();
  return std::shared_ptr<const CustomOp>(std::move(op));
}

CustomOp::~CustomOp() {
  if (def_.release) def_.release(def_.user_data);
}

std::string CustomOp::Label() const {
  return domain_ + "." + op_type_ + " (since " + std::to_string(def_.since_version) + ")";
}

OpSchema CustomOp::Schema() const {
  OpSchema s{domain_.c_str(),
             op_type_.c_str(),
             def_.since_version,
             def_.min_inputs,
             MaxArity(def_.max_inputs),
             def_.min_outputs,
             MaxArity(def_.max_outputs),
             def_.infer ? InferCustomOp : nullptr,
             RunCustomOp};
  s.custom = this;
  return s;
}

// ---- Registration through the ABI (api->register_op, api->registry_error).

int32_t CustomOpRegisterOp(nee_custom_op_registry* registry, const nee_custom_op_def* def) {
  if (!registry) return NEE_CUSTOM_OP_INVALID;
  try {
    if (!registry->open) {
      registry->error = "register_op called after nee_register_custom_ops returned";
      return NEE_CUSTOM_OP_INVALID;
    }
    if (!def) {
      registry->error = "register_op: the definition is NULL";
      return NEE_CUSTOM_OP_INVALID;
    }
    Result<std::shared_ptr<const CustomOp>> op = CustomOp::Make(*def, registry->library, registry->origin);
    if (!op.ok()) {
      if (registry->error.empty()) registry->error = op.status().message();
      return NEE_CUSTOM_OP_FAIL;
    }
    registry->ops.push_back(std::move(op).value());
    return NEE_CUSTOM_OP_OK;
  } catch (...) {  // allocation failure
    return NEE_CUSTOM_OP_FAIL;
  }
}

void CustomOpRegistryError(nee_custom_op_registry* registry, const char* message) {
  if (!registry) return;
  try {
    registry->error = message && *message ? message : "registration failed (no message)";
  } catch (...) {
  }
}

// ---- A session's set.

Status CustomOpSet::Add(std::shared_ptr<const CustomOp> op) {
  for (const auto& other : ops_) {
    if (other->domain() == op->domain() && other->op_type() == op->op_type() &&
        other->def().since_version == op->def().since_version)
      return InvalidArgument("custom op " + op->Label() + " is registered twice: by " + other->origin() +
                             " and by " + op->origin());
  }
  ops_.push_back(std::move(op));
  registry_.Register(ops_.back()->Schema());
  return Status::Ok();
}

Status CustomOpSet::LoadLibrary(const std::string& path) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<SharedLibrary> library, SharedLibrary::Open(path));
  const std::string origin = "the library '" + path + "'";
  auto version_symbol = library->Symbol(NEE_CUSTOM_OPS_ABI_VERSION_SYMBOL);
  if (!version_symbol.ok())
    return version_symbol.status().WithContext("not a nee custom-op library (include/nee/custom_op.h): ");
  NEE_ASSIGN_OR_RETURN(void* register_symbol, library->Symbol(NEE_CUSTOM_OPS_REGISTER_SYMBOL));
  const uint32_t version = reinterpret_cast<nee_custom_ops_abi_version_fn>(version_symbol.value())();
  if (version != NEE_CUSTOM_OP_ABI_VERSION)
    return InvalidArgument(origin + " was built for custom-op ABI version " + std::to_string(version) +
                           "; this nee implements version " + std::to_string(NEE_CUSTOM_OP_ABI_VERSION) +
                           " (include/nee/custom_op.h): rebuild it against this nee's header");
  nee_custom_op_registry registry;
  registry.library = library;
  registry.origin = origin;
  int32_t rc = NEE_CUSTOM_OP_FAIL;
  try {
    rc = reinterpret_cast<nee_register_custom_ops_fn>(register_symbol)(&registry, CustomOpApi());
  } catch (...) {
    registry.error = "nee_register_custom_ops threw a C++ exception";
  }
  registry.open = false;
  if (rc != NEE_CUSTOM_OP_OK || !registry.error.empty())
    return InvalidArgument("registering the custom ops of " + origin + " failed: " +
                           (registry.error.empty() ? "nee_register_custom_ops returned " + std::to_string(rc)
                                                   : registry.error));
  for (auto& op : registry.ops) NEE_RETURN_IF_ERROR(Add(std::move(op)));
  return Status::Ok();
}

Result<std::shared_ptr<const CustomOpSet>> CustomOpSet::Create(
    const std::vector<std::string>& libraries, const std::vector<std::shared_ptr<const CustomOp>>& ops) {
  std::shared_ptr<CustomOpSet> set(new CustomOpSet());
  for (const std::string& path : libraries) NEE_RETURN_IF_ERROR(set->LoadLibrary(path));
  for (const auto& op : ops) {
    if (!op) return InvalidArgument("a custom op definition is null");
    NEE_RETURN_IF_ERROR(set->Add(op));
  }
  return std::shared_ptr<const CustomOpSet>(std::move(set));
}

}  // namespace nee
