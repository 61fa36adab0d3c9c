// Custom operators: ops a session adds to nee's own through the C ABI of
// include/nee/custom_op.h, from shared libraries loaded when the session is
// created or from definitions registered in-process (the C API, Python).
//
// They are per session: a CustomOpSet is a registry layered over
// OpRegistry::Global() holding one session's custom ops, so two sessions
// with different libraries never see each other's ops. Each op's schema
// entry has the shared shape rule and kernel of custom_op_bridge.cc, which
// call the op's callbacks through OpSchema::custom.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/shared_library.h"
#include "nee/custom_op.h"
#include "ops/op_registry.h"

namespace nee {

// One custom op: a checked copy of its definition (strings owned) and the
// library its code lives in (kept loaded while the op exists).
class CustomOp {
 public:
  // Checks and copies `def`. `origin` says where it comes from in messages
  // ("the library '/x/libops.so'", "registered in-process").
  static Result<std::shared_ptr<const CustomOp>> Make(const nee_custom_op_def& def,
                                                      std::shared_ptr<SharedLibrary> library, std::string origin);
  // Calls the definition's release(user_data), then lets the library go.
  ~CustomOp();
  CustomOp(const CustomOp&) = delete;
  CustomOp& operator=(const CustomOp&) = delete;

  const std::string& domain() const { return domain_; }
  const std::string& op_type() const { return op_type_; }
  const std::string& origin() const { return origin_; }
  const nee_custom_op_def& def() const { return def_; }
  // "nee.example.Swish (since 1)"
  std::string Label() const;
  // The schema entry: arity, the bridge's rule and kernel, `custom` = this.
  OpSchema Schema() const;

 private:
  CustomOp() = default;
  nee_custom_op_def def_{};
  std::string domain_, op_type_, origin_;
  std::shared_ptr<SharedLibrary> library_;  // destroyed after release() ran
};

// Whether nee itself implements `domain` ("", ai.onnx, ai.onnx.ml, the
// preview domains, ai.nee): custom ops may not be added to it.
bool IsBuiltinDomain(const std::string& domain);

// The custom ops of one session.
class CustomOpSet {
 public:
  // Loads each library in order and registers its ops, then adds `ops`.
  // Errors name the library's path (it does not exist, lacks an entry point,
  // was built for another ABI version, its registration failed) or the op
  // (registered twice, in a domain nee implements).
  static Result<std::shared_ptr<const CustomOpSet>> Create(const std::vector<std::string>& libraries,
                                                           const std::vector<std::shared_ptr<const CustomOp>>& ops);
  CustomOpSet(const CustomOpSet&) = delete;
  CustomOpSet& operator=(const CustomOpSet&) = delete;

  // nee's ops with this set's on top.
  const OpRegistry& registry() const { return registry_; }
  const std::vector<std::shared_ptr<const CustomOp>>& ops() const { return ops_; }

 private:
  CustomOpSet() : registry_(&OpRegistry::Global()) {}
  Status Add(std::shared_ptr<const CustomOp> op);
  Status LoadLibrary(const std::string& path);

  // Declared first, destroyed last: the registry's entries point into them.
  std::vector<std::shared_ptr<const CustomOp>> ops_;
  OpRegistry registry_;
};

// ---- The bridge (custom_op_bridge.cc) --------------------------------------

// The function table handed to libraries and callbacks.
const nee_custom_op_api* CustomOpApi();
// api->register_op and api->registry_error (custom_ops.cc).
int32_t CustomOpRegisterOp(nee_custom_op_registry* registry, const nee_custom_op_def* def);
void CustomOpRegistryError(nee_custom_op_registry* registry, const char* message);
// The shape rule and kernel of every custom op's schema entry.
Status InferCustomOp(InferenceContext& ctx);
Status RunCustomOp(KernelContext& ctx);

}  // namespace nee
