# The event log's reader; the safe file opening and output routing.
add_executable(test_jsonl_read ${CMAKE_CURRENT_LIST_DIR}/test_jsonl_read.c)
target_link_libraries(test_jsonl_read PRIVATE hcg_core)
if(CMAKE_CROSSCOMPILING)
  # Under qemu-user the program cannot exec its own copies: its case
  # header_fits is left out of the cross build (the native builds run it).
  target_compile_definitions(test_jsonl_read PRIVATE HCG_TEST_NO_SELF_EXEC)
endif()
add_test(NAME test_jsonl_read COMMAND test_jsonl_read)
set_tests_properties(test_jsonl_read PROPERTIES LABELS unit TIMEOUT 60)
# The reader as a command: the end-to-end log tests read every log with it.
add_executable(read_log ${CMAKE_CURRENT_LIST_DIR}/read_log.c)
target_link_libraries(read_log PRIVATE hcg_core)
