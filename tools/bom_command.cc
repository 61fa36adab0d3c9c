// `nee bom MODEL [-o FILE]`: the model's CycloneDX 1.6 ML-BOM (format/ml_bom.h),
// to stdout or FILE.
#include <cstdio>
#include <fstream>
#include <string>

#include "format/ml_bom.h"
#include "tools/cli_common.h"

namespace nee_cli {

int Bom(int argc, char** argv) {
  if (argc < 3) throw UsageError{"nee bom needs a model"};
  const std::string model = argv[2];
  if (model.rfind("--", 0) == 0) throw UsageError{"expected a model path after 'bom', got '" + model + "'"};
  std::string output;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "-o" || arg == "--output") && i + 1 < argc) output = argv[++i];
    else if (arg == "-o" || arg == "--output") throw UsageError{arg + " needs a value"};
    else throw UsageError{"option '" + arg + "' does not apply to nee bom"};
  }
  auto bom = nee::MakeMlBom(model);
  ThrowIfError(bom.status());
  if (output.empty()) {
    std::fwrite(bom->data(), 1, bom->size(), stdout);
    return 0;
  }
  std::ofstream file(output, std::ios::binary);
  file << *bom;
  file.close();
  if (!file) throw neeapi::Error(NEE_STATUS_IO_ERROR, "cannot write '" + output + "'");
  std::printf("CycloneDX 1.6 ML-BOM written to %s\n", output.c_str());
  return 0;
}

}  // namespace nee_cli
