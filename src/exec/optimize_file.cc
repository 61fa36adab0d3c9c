#include "exec/optimize_file.h"

#include <algorithm>
#include <cstdio>

#include "base/json.h"
#include "format/lineage.h"
#include "format/metadata_edit.h"
#include "format/onnx_reader.h"
#include "format/onnx_writer.h"
#include "ir/inline_functions.h"
#include "ops/attr_spec.h"
#include "opt/pass_manager.h"

namespace nee {

namespace {

std::string FormatReport(const std::vector<PassReport>& report, size_t nodes_in, size_t nodes_out) {
  std::string out;
  char line[200];
  // The name column as wide as the longest pass name, so that the numbers line up.
  int width = 4;
  for (const PassReport& r : report) width = std::max(width, static_cast<int>(r.pass.size()));
  std::snprintf(line, sizeof line, "%-*s %5s %8s %8s  %s\n", width, "pass", "level", "nodes", "after", "result");
  out += line;
  for (const PassReport& r : report) {
    const char* result = r.undone ? "undone (the checker rejected it)" : r.changed ? "changed" : "-";
    std::snprintf(line, sizeof line, "%-*s %5d %8zu %8zu  %s", width, r.pass.c_str(), r.level, r.nodes_before,
                  r.nodes_after, result);
    out += line;
    out += r.graph.empty() ? "\n" : " in " + r.graph + "\n";
  }
  std::snprintf(line, sizeof line, "nodes: %zu -> %zu\n", nodes_in, nodes_out);
  return out + line;
}

// Records the level, replacing an earlier record.
void RecordLevel(Model& model, int level) {
  auto& props = model.metadata_props;
  for (size_t i = props.size(); i-- > 0;)
    if (props[i].first == kOptimizedLevelKey) props.erase(props.begin() + static_cast<std::ptrdiff_t>(i));
  props.emplace_back(kOptimizedLevelKey, std::to_string(level));
}

}  // namespace

Result<std::string> OptimizeModelFile(const std::string& in_path, const std::string& out_path, int level) {
  if (level < 0) return InvalidArgument("optimization level must be 0 or more, got " + std::to_string(level));
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(in_path));
  NEE_ASSIGN_OR_RETURN(LineageRecorder lineage, LineageRecorder::Begin(in_path, model));
  NEE_RETURN_IF_ERROR(InlineModelFunctions(model));
  const size_t nodes_in = model.graph.nodes.size();
  std::vector<PassReport> report;
  NEE_RETURN_IF_ERROR(OptimizeModel(model, level, &report));
  // Checked once more as written: what `nee optimize` hands out must load.
  BindAttrDeclarations(model);
  NEE_RETURN_IF_ERROR(CheckModel(model, OpRegistry::Global()).status());
  RecordLevel(model, level);
  NEE_RETURN_IF_ERROR(lineage.Append(model, "optimize", Json::Object().Set("opt_level", Json::Number(level))));
  NEE_RETURN_IF_ERROR(WriteModelFile(model, out_path, KeepingExternalData(model, in_path)));
  return FormatReport(report, nodes_in, model.graph.nodes.size());
}

}  // namespace nee
