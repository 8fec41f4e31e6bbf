# Unit test of the entry-point thunks (thunk.c). Included from
# tests/unit/CMakeLists.txt.
add_executable(test_thunk ${CMAKE_CURRENT_LIST_DIR}/test_thunk.c)
target_link_libraries(test_thunk PRIVATE hcg_core)
# Each real function keeps its own address, so each gets its own thunk.
target_compile_options(test_thunk PRIVATE -fno-ipa-icf)
add_test(NAME test_thunk COMMAND test_thunk)
set_tests_properties(test_thunk PROPERTIES LABELS unit TIMEOUT 300)
