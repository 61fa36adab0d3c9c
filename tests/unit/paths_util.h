// The paths the unit tests open: their data (tests/) and the custom-op
// libraries the build makes. Defined in paths_util.cc, the one test object
// compiled with them (tests/CMakeLists.txt): as -D flags on every test they
// would make every test object a ccache miss in a clone in another directory.
#pragma once

namespace nee_test {
extern const char* const kTestDataDir;       // tests/ of the source tree
extern const char* const kExampleOpsLibrary;  // libnee_example_ops.so
extern const char* const kBadAbiOpsLibrary;   // libnee_test_bad_abi_ops.so
}  // namespace nee_test

#define NEE_TEST_DATA_DIR ::nee_test::kTestDataDir
#define NEE_EXAMPLE_OPS_LIBRARY ::nee_test::kExampleOpsLibrary
#define NEE_BAD_ABI_OPS_LIBRARY ::nee_test::kBadAbiOpsLibrary
