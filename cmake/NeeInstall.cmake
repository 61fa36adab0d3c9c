# Install rules (included at the end of the top-level CMakeLists.txt).
#
# `cmake --install build --prefix P` lays out, under P:
#   include/nee/nee.h, nee.hpp          the C API and its header-only C++ wrapper
#   lib/libnee.so.X.Y.Z (SONAME libnee.so.X) and the libnee.so.X, libnee.so links
#   lib/cmake/nee/                       neeConfig.cmake, neeConfigVersion.cmake,
#                                        neeTargets*.cmake: find_package(nee) -> nee::nee
#   lib/pkgconfig/nee.pc                 pkg-config --cflags --libs nee
#   bin/nee                              the command-line tool
# Components: Runtime (library, CLI), Development (headers, libnee.so link,
# CMake package, pkg-config file). tests/install/check_install.sh builds
# a consumer against the result both ways.
#
# In a wheel build (scikit-build-core sets SKBUILD) only the `python`
# component is installed: the extension (python/CMakeLists.txt) and the CLI
# beside it as nee/_bin/nee, which the `nee` console command and
# `python -m nee` run (python/nee/__main__.py).

if(SKBUILD)
  install(TARGETS nee_cli RUNTIME DESTINATION nee/_bin COMPONENT python)
  return()
endif()

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(NEE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/nee)

install(TARGETS nee EXPORT neeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/nee DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT Development FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(TARGETS nee_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)

install(EXPORT neeTargets NAMESPACE nee:: DESTINATION ${NEE_CMAKE_DIR} COMPONENT Development)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/neeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/neeConfig.cmake INSTALL_DESTINATION ${NEE_CMAKE_DIR})
# 0.x: a new minor version may change the C API, so only the same minor matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/neeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/neeConfig.cmake ${CMAKE_BINARY_DIR}/cmake/neeConfigVersion.cmake
  DESTINATION ${NEE_CMAKE_DIR} COMPONENT Development)

# The .pc file names its prefix relative to itself, so an installed tree can be moved
# (and `cmake --install --prefix` chosen at install time is honoured).
file(RELATIVE_PATH NEE_PC_PREFIX_FROM_PCDIR /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" NEE_PC_PREFIX_FROM_PCDIR "${NEE_PC_PREFIX_FROM_PCDIR}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/nee.pc.in ${CMAKE_BINARY_DIR}/cmake/nee.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/nee.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT Development)
