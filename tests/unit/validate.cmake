# Unit tests of the record validator (validate.c), the address-space oracle
# (oracle.c), the copy API (copy.c) and the table of real libc functions
# (driver/libc.c). Included from tests/unit/CMakeLists.txt.
foreach(t test_validate test_oracle test_pack test_libc)
  add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE hcg_core)
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES LABELS unit TIMEOUT 300)
endforeach()
