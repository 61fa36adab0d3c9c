// `nee check MODEL [--custom-ops LIB]...`: validates a model through nee's own loader and checker
// (what onnx.checker and onnx.shape_inference do together) and prints the
// opsets, the inferred type and shape of every value and every problem
// found, each naming the node it concerns. Exit status 0 when the model is
// valid, 1 when it is not (2 for usage errors), for use in CI. A model with
// custom ops is checked against the ops of the libraries given, as a session
// created with them would check it (their shape rules included).
#include <cstdio>
#include <string>
#include <vector>

#include "check/checker.h"
#include "format/onnx_reader.h"
#include "ir/inline_functions.h"
#include "ops/attr_spec.h"
#include "ops/custom_ops.h"
#include "ops/op_registry.h"
#include "tools/cli_common.h"

namespace nee_cli {
namespace {

// "tensor(float) [batch,3]"; "unknown" where nothing was inferred (a value
// defined by a node with a problem, or by an op whose rule leaves it open).
std::string TypeText(const nee::TypeInfo& t) {
  if (t.kind == nee::TypeInfo::Kind::kUnknown) return "unknown";
  std::string s = t.ToString();
  if (t.kind == nee::TypeInfo::Kind::kTensor || t.kind == nee::TypeInfo::Kind::kSparseTensor)
    s += t.shape ? " " + nee::ShapeToString(*t.shape) : " (rank unknown)";
  return s;
}

std::string OpsetsText(const nee::Model& model) {
  std::string s;
  for (const nee::OpsetImport& o : model.opset_imports) {
    const std::string domain = nee::NormalizeDomain(o.domain).empty() ? "ai.onnx" : o.domain;
    s += (s.empty() ? "" : ", ") + domain + " " + std::to_string(o.version);
  }
  return s.empty() ? "none" : s;
}

int Report(const std::vector<nee::Status>& problems) {
  if (problems.empty()) {
    std::printf("problems: none\nvalid\n");
    return 0;
  }
  std::printf("problems:\n");
  for (const nee::Status& p : problems) std::printf("  %s\n", p.message().c_str());
  std::printf("invalid: %zu problem%s\n", problems.size(), problems.size() == 1 ? "" : "s");
  return 1;
}

}  // namespace

int Check(int argc, char** argv) {
  if (argc < 3) throw UsageError{"nee check needs a model path"};
  const std::string path = argv[2];
  if (path.rfind("-", 0) == 0) throw UsageError{"expected a model path after 'check', got '" + path + "'"};
  std::vector<std::string> libraries;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--custom-ops") throw UsageError{"option '" + arg + "' does not apply to nee check"};
    if (i + 1 >= argc) throw UsageError{"--custom-ops needs a library path"};
    libraries.push_back(argv[++i]);
  }

  std::printf("model:      %s\n", path.c_str());
  nee::Result<nee::Model> read = nee::ReadModelFile(path);
  if (!read.ok()) return Report({read.status()});
  nee::Model& model = read.value();
  std::printf("ir version: %lld\n", static_cast<long long>(model.ir_version));
  std::printf("opsets:     %s\n", OpsetsText(model).c_str());
  // Every model-local function's body on its own (called or not); then calls
  // are expanded, as a session does, so called bodies are typed too.
  nee::Result<std::shared_ptr<const nee::CustomOpSet>> custom = nee::CustomOpSet::Create(libraries, {});
  if (!custom.ok()) return Report({custom.status()});
  const nee::OpRegistry& registry = custom.value()->registry();
  std::vector<nee::Status> problems;
  nee::Status functions = nee::CheckModelFunctions(model, registry, &problems);
  if (!functions.ok()) return Report({functions});
  nee::Status inlined = nee::InlineModelFunctions(model);
  if (!inlined.ok()) {
    problems.push_back(inlined);
    return Report(problems);
  }
  nee::BindAttrDeclarations(model);  // shape rules read absent attributes' declared defaults

  nee::CheckOptions options;
  options.problems = &problems;
  nee::Result<nee::CheckedGraph> checked = nee::CheckModel(model, registry, options);
  if (!checked.ok()) {
    problems.push_back(checked.status());
    return Report(problems);
  }
  const auto& types = checked->types;
  auto type_of = [&](const std::string& name, const nee::TypeInfo& declared) {
    auto it = types.find(name);
    return TypeText(it != types.end() ? it->second : declared);
  };
  const nee::Graph& g = model.graph;
  std::printf("inputs:\n");
  for (const nee::ValueInfo& vi : g.inputs) std::printf("  %s: %s\n", vi.name.c_str(), type_of(vi.name, vi.type).c_str());
  std::printf("nodes:\n");
  for (const nee::Node& node : g.nodes) {
    std::printf("  %s\n", node.Describe().c_str());
    for (const std::string& o : node.outputs)
      if (!o.empty()) std::printf("    %s: %s\n", o.c_str(), type_of(o, nee::TypeInfo{}).c_str());
  }
  std::printf("outputs:\n");
  for (const nee::ValueInfo& vi : g.outputs) std::printf("  %s: %s\n", vi.name.c_str(), type_of(vi.name, vi.type).c_str());
  return Report(problems);
}

}  // namespace nee_cli
