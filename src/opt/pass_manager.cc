#include "opt/pass_manager.h"

namespace nee {

namespace {
const GraphPass kPasses[] = {
    {"fold-constants", 1, FoldConstants},
    {"eliminate-dead-nodes", 1, EliminateDeadNodes},
};
}  // namespace

Status OptimizeModel(Model& model, int level) {
  for (const GraphPass& pass : kPasses) {
    if (pass.level > level) continue;
    NEE_ASSIGN_OR_RETURN(CheckedGraph checked, CheckModel(model, OpRegistry::Global()));
    bool changed = false;
    Status st = pass.run(model.graph, checked, &changed);
    if (!st.ok()) return st.WithContext(std::string("optimization pass ") + pass.name + ": ");
  }
  return Status::Ok();
}

}  // namespace nee
