# Unit tests of the entry-point thunks (thunk.c). Included from
# tests/unit/CMakeLists.txt.
add_executable(test_thunk ${CMAKE_CURRENT_LIST_DIR}/test_thunk.c)
target_link_libraries(test_thunk PRIVATE hcg_core)
# Each real function keeps its own address, so each gets its own thunk.
target_compile_options(test_thunk PRIVATE -fno-ipa-icf)
# The driver the exports are tested against.
add_library(exports_driver MODULE ${CMAKE_CURRENT_LIST_DIR}/exports_driver.c)
target_include_directories(exports_driver PRIVATE ${HCGUARD_CUDA_INCLUDE})
add_dependencies(test_thunk exports_driver)
add_test(NAME test_thunk COMMAND test_thunk)
# No driver: the exports answer CUDA_ERROR_NOT_INITIALIZED.
add_test(NAME test_thunk_nodriver COMMAND test_thunk nodriver)
set_tests_properties(test_thunk PROPERTIES
  ENVIRONMENT "HCGUARD_DRIVER=$<TARGET_FILE:exports_driver>")
set_tests_properties(test_thunk_nodriver PROPERTIES
  ENVIRONMENT "HCGUARD_DRIVER=${CMAKE_CURRENT_BINARY_DIR}/no-such-driver/libcuda.so.1")

# The portable fallback (no stubs), as other architectures build it.
add_executable(test_thunk_portable ${CMAKE_CURRENT_LIST_DIR}/test_thunk.c
  ${PROJECT_SOURCE_DIR}/src/intercept/thunk.c ${PROJECT_SOURCE_DIR}/src/base/thread.c)
target_include_directories(test_thunk_portable PRIVATE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${HCG_GENERATED_DIR} ${HCGUARD_CUDA_INCLUDE})
target_compile_definitions(test_thunk_portable PRIVATE HCG_THUNK_NO_ASM)
target_compile_options(test_thunk_portable PRIVATE -fno-ipa-icf)
target_link_libraries(test_thunk_portable PRIVATE Threads::Threads)
add_test(NAME test_thunk_portable COMMAND test_thunk_portable)

set_tests_properties(test_thunk test_thunk_nodriver test_thunk_portable PROPERTIES
  LABELS unit TIMEOUT 300)
