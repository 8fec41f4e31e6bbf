# What `cmake --install` puts beside the launcher and the library, so that
# other builds can use hcguard as a package:
#   lib/libhcguard.so.0.1.0        the library (SONAME libhcguard.so.0)
#   lib/libhcguard.so.0            link to it: what programs linked with it load
#   lib/libhcguard.so              link to it: -lhcguard, LD_PRELOAD, the launcher
#   lib/cmake/hcguard/             find_package(hcguard CONFIG): hcguard::hcguard
#   lib/pkgconfig/hcguard.pc       pkg-config --cflags --libs hcguard
#   share/man/man1/hcguard.1       man hcguard
#   share/doc/hcguard/LICENSE
# The directories are lib/, bin/ and share/ under any prefix (not
# GNUInstallDirs' multiarch libdir): the launcher finds the library as
# <bin>/../lib, in the build tree and once installed.
include(CMakePackageConfigHelpers)

# The public header carries the version too: keep the two from drifting.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/hcguard.h _hcg_version_lines
  REGEX "^#define HCGUARD_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE "[^;]*_(MAJOR|MINOR|PATCH) +([0-9]+)" "\\2" _hcg_header_version
  "${_hcg_version_lines}")
string(REPLACE ";" "." _hcg_header_version "${_hcg_header_version}")
if(NOT _hcg_header_version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/hcguard.h says version ${_hcg_header_version}, "
    "CMakeLists.txt ${PROJECT_VERSION}: make them agree")
endif()

# libhcguard.so.0 -> libhcguard.so.0.1.0, and libhcguard.so beside them
# (the build tree's lib/ has the same three).
set_target_properties(hcguard PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
# What a target linking hcguard::hcguard compiles with: the public header
# only (it needs no CUDA header).
target_include_directories(hcguard INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)

set(HCG_CMAKE_PACKAGE_DIR lib/cmake/hcguard)
install(EXPORT hcguardTargets NAMESPACE hcguard:: FILE hcguardTargets.cmake
  DESTINATION ${HCG_CMAKE_PACKAGE_DIR})
configure_package_config_file(cmake/hcguardConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/hcguardConfig.cmake
  INSTALL_DESTINATION ${HCG_CMAKE_PACKAGE_DIR})
# 0.x: a program built against 0.1 runs with any later 0.y (the SONAME's
# promise); a request for 1.0 is not met by 0.y.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/hcguardConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/hcguardConfig.cmake
  ${CMAKE_BINARY_DIR}/package/hcguardConfigVersion.cmake
  DESTINATION ${HCG_CMAKE_PACKAGE_DIR})

# pkg-config wants absolute paths; the prefix is known only at install time
# (`cmake --install BUILD --prefix DIR`), so hcguard.pc is written then.
install(CODE "
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(HCG_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(_pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/pkgconfig/hcguard.pc\")
  message(STATUS \"Installing: \${_pc}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/hcguard.pc.in\" \"\${_pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${CMAKE_INSTALL_PREFIX}/lib/pkgconfig/hcguard.pc\")")

install(FILES man/hcguard.1 DESTINATION share/man/man1)
install(FILES LICENSE DESTINATION share/doc/hcguard)
