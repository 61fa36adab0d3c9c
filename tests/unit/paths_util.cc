// See paths_util.h. The NEE_TEST_PATH_* definitions come from tests/CMakeLists.txt.
#include "paths_util.h"

namespace nee_test {
const char* const kTestDataDir = NEE_TEST_PATH_DATA_DIR;
const char* const kExampleOpsLibrary = NEE_TEST_PATH_EXAMPLE_OPS_LIBRARY;
const char* const kBadAbiOpsLibrary = NEE_TEST_PATH_BAD_ABI_OPS_LIBRARY;
}  // namespace nee_test
