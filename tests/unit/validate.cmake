# Unit tests of the record validator (validate.c), the address-space oracle
# (oracle.c), the copy API (copy.c), the split copy (parcopy.c) and the table
# of real libc functions (driver/libc.c). Included from tests/unit/CMakeLists.txt.
foreach(t test_validate test_oracle test_pack test_libc test_parcopy)
  add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE hcg_core)
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES LABELS unit TIMEOUT 300)
endforeach()
# qemu-user (cross builds' emulator) cannot fork a process whose threads
# are running (it fails an assertion of its own): there the split copy's
# fork case is left out of test_parcopy, listed as a test of its own that
# does not run.
if(CMAKE_CROSSCOMPILING)
  target_compile_definitions(test_parcopy PRIVATE HCG_TEST_NO_THREADED_FORK)
  add_test(NAME test_parcopy_fork COMMAND test_parcopy fork)
  set_tests_properties(test_parcopy_fork PROPERTIES LABELS unit DISABLED TRUE)
endif()
# Attacks on the fault-contained copy itself (fault.c), with the program's
# own SIGSEGV handler: a sanitizer's SIGSEGV reporting is not what it watches.
add_executable(test_fault ${CMAKE_CURRENT_LIST_DIR}/test_fault.c)
target_link_libraries(test_fault PRIVATE hcg_core)
add_test(NAME test_fault COMMAND test_fault)
set_tests_properties(test_fault PROPERTIES LABELS unit TIMEOUT 300 ENVIRONMENT
  "ASAN_OPTIONS=handle_segv=0:handle_sigbus=0;TSAN_OPTIONS=handle_segv=0:handle_sigbus=0")
