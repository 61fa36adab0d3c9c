// `nee convert MODEL --opset N -o OUT.onnx`: the model's default-domain
// (ai.onnx) nodes rewritten for another opset, up or (where the spec allows)
// down, by nee's own converter (src/opt/opset_convert.h). The result is
// checked at the new opset before it is written, and a lineage record
// ("convert") is appended. A node that cannot be converted is an error naming
// it, its op and both versions; nothing is written then (exit status 1).
#include <cstdio>
#include <string>

#include "opt/opset_convert.h"
#include "tools/cli_common.h"

namespace nee_cli {

int Convert(int argc, char** argv) {
  if (argc < 3) throw UsageError{"nee convert needs a model path"};
  const std::string in = argv[2];
  if (in.rfind("-", 0) == 0) throw UsageError{"expected a model path after 'convert', got '" + in + "'"};
  std::string out;
  int64_t opset = -1;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      return argv[++i];
    };
    if (arg == "--opset") opset = ParseCount(arg, next(), 1, 1000);
    else if (arg == "-o" || arg == "--output") out = next();
    else throw UsageError{"option '" + arg + "' does not apply to nee convert"};
  }
  if (opset < 0) throw UsageError{"convert needs --opset N"};
  if (out.empty()) throw UsageError{"convert needs -o OUT.onnx"};
  nee::Result<nee::OpsetConversionReport> report = nee::ConvertOpsetFile(in, out, opset);
  ThrowIfError(report.status());
  std::printf("%s", report->Text().c_str());
  std::printf("written to %s (lineage record appended)\n", out.c_str());
  return 0;
}

}  // namespace nee_cli
