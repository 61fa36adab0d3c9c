// `nee meta MODEL`: lists a model's descriptive fields, custom metadata and
// lineage; with --set/--delete/--producer-name/... -o OUT writes an edited
// copy (format/metadata_edit.h); --verify re-checks the lineage hashes
// (format/lineage.h). Also `nee inspect`'s lineage section.
#include <cstdio>
#include <string>
#include <vector>

#include "format/lineage.h"
#include "format/metadata_edit.h"
#include "format/onnx_reader.h"
#include "tools/cli_common.h"

namespace nee_cli {

void ThrowIfError(const nee::Status& status) {
  if (!status.ok()) throw neeapi::Error(static_cast<nee_status_code_t>(status.code()), status.message());
}

void PrintLineage(const std::vector<std::pair<std::string, std::string>>& metadata_props) {
  const auto records = nee::ReadLineage(metadata_props);
  if (records.empty()) return;
  std::printf("lineage (oldest first):\n");
  for (const auto& r : records) {
    std::printf("  %s: %s\n", r.key.c_str(), r.Summary().c_str());
    if (!r.error.empty()) continue;
    std::printf("    input  %s sha256 %s\n", r.Field("input", "file").c_str(), r.Field("input", "sha256").c_str());
    std::printf("    weights %s -> %s\n", r.Field("input", "weights_sha256").c_str(),
                r.Field("output", "weights_sha256").c_str());
  }
}

namespace {

struct MetaArgs {
  std::string model, output;
  bool verify = false;
  nee::MetadataEdit edit;
  bool Edits() const {
    return !edit.set.empty() || !edit.remove.empty() || edit.producer_name || edit.producer_version || edit.domain ||
           edit.doc_string || edit.model_version;
  }
};

MetaArgs ParseMeta(int argc, char** argv) {
  if (argc < 3) throw UsageError{"nee meta needs a model"};
  MetaArgs a;
  a.model = argv[2];
  if (a.model.rfind("--", 0) == 0) throw UsageError{"expected a model path after 'meta', got '" + a.model + "'"};
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    if (arg == "--set") {
      const std::string pair = next();
      const size_t eq = pair.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError{"--set expects KEY=VALUE, got '" + pair + "'"};
      a.edit.set.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
    } else if (arg == "--delete") a.edit.remove.push_back(next());
    else if (arg == "--producer-name") a.edit.producer_name = next();
    else if (arg == "--producer-version") a.edit.producer_version = next();
    else if (arg == "--domain") a.edit.domain = next();
    else if (arg == "--doc-string") a.edit.doc_string = next();
    else if (arg == "--model-version") a.edit.model_version = ParseCount(arg, next(), 0, INT64_MAX);
    else if (arg == "-o" || arg == "--output") a.output = next();
    else if (arg == "--verify") a.verify = true;
    else throw UsageError{"option '" + arg + "' does not apply to nee meta"};
  }
  for (const auto& [key, value] : a.edit.set)
    if (nee::IsLineageKey(key)) throw UsageError{"--set " + key + ": lineage records are append-only"};
  for (const auto& key : a.edit.remove)
    if (nee::IsLineageKey(key)) throw UsageError{"--delete " + key + ": lineage records are append-only"};
  if (a.Edits() && a.output.empty()) throw UsageError{"nee meta: edits need -o OUT.onnx"};
  if (!a.Edits() && !a.output.empty()) throw UsageError{"nee meta: -o given but nothing to edit"};
  if (a.verify && a.Edits()) throw UsageError{"nee meta: --verify does not combine with edits"};
  return a;
}

nee::Model Read(const std::string& path) {
  auto model = nee::ReadModelFile(path);
  ThrowIfError(model.status());
  return std::move(model).value();
}

int List(const std::string& path) {
  const nee::Model m = Read(path);
  std::printf("model:            %s\n", path.c_str());
  std::printf("producer name:    %s\n", m.producer_name.c_str());
  std::printf("producer version: %s\n", m.producer_version.c_str());
  std::printf("domain:           %s\n", m.domain.c_str());
  std::printf("model version:    %lld\n", static_cast<long long>(m.model_version));
  std::printf("doc string:       %s\n", m.doc_string.c_str());
  std::printf("ir version:       %lld\n", static_cast<long long>(m.ir_version));
  std::printf("opsets:          ");
  for (size_t i = 0; i < m.opset_imports.size(); ++i)
    std::printf("%s %s %lld", i ? "," : "", m.opset_imports[i].domain.empty() ? "ai.onnx" : m.opset_imports[i].domain.c_str(),
                static_cast<long long>(m.opset_imports[i].version));
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : m.metadata_props)
    if (!nee::IsLineageKey(key)) std::printf("  %s = %s\n", key.c_str(), value.c_str());
  PrintLineage(m.metadata_props);
  return 0;
}

int Verify(const std::string& path) {
  const auto checks = nee::VerifyLineage(Read(path));
  if (checks.empty()) {
    std::printf("%s has no lineage records\n", path.c_str());
    return 0;
  }
  int mismatches = 0;
  for (const auto& c : checks) {
    std::printf("%s: %s: %s\n", c.key.c_str(), c.ok ? "ok" : "mismatch", c.message.c_str());
    mismatches += c.ok ? 0 : 1;
  }
  std::printf("%zu records, %d mismatched\n", checks.size(), mismatches);
  return mismatches ? 1 : 0;
}

}  // namespace

int Meta(int argc, char** argv) {
  const MetaArgs a = ParseMeta(argc, argv);
  if (a.verify) return Verify(a.model);
  if (!a.Edits()) return List(a.model);
  ThrowIfError(nee::EditModelFile(a.model, a.output, a.edit));
  std::printf("written to %s (lineage record appended)\n", a.output.c_str());
  return 0;
}

}  // namespace nee_cli
