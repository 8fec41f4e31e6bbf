# Unit tests of configuration (config.c), .symtab reading (elfsym.c) and
# host-copy recognition (recognize.c). Included from tests/unit/CMakeLists.txt.

# A fake cuda.core _host_callback extension module, placed where a wheel
# puts it, plus copies under other paths and a copy without .symtab.
set(HCG_PYMOD_DIR ${CMAKE_CURRENT_BINARY_DIR}/pymod)
set(HCG_PYMOD_STRIPPED_DIR ${CMAKE_CURRENT_BINARY_DIR}/pymod_stripped)
set(HCG_PYMOD_FILE _host_callback.cpython-311-x86_64-linux-gnu.so)

add_library(hcg_fake_host_callback MODULE ${CMAKE_CURRENT_LIST_DIR}/pymod/host_callback.c)
set_target_properties(hcg_fake_host_callback PROPERTIES
  PREFIX "" SUFFIX ".so"
  OUTPUT_NAME _host_callback.cpython-311-x86_64-linux-gnu
  LIBRARY_OUTPUT_DIRECTORY ${HCG_PYMOD_DIR}/cuda/core/cu13)
# Every function keeps its own code, address and symbol.
target_compile_options(hcg_fake_host_callback PRIVATE -fno-ipa-icf)

if(NOT CMAKE_OBJCOPY)
  find_program(CMAKE_OBJCOPY objcopy REQUIRED)
endif()

# Under cuda/core/ and cuda/core/graph/ it must be recognised; under
# xcuda/core/ or other/, or with another file name, not; the stripped copy
# only through registration.
set(HCG_PYMOD_COPIES
  cuda/core/${HCG_PYMOD_FILE}
  cuda/core/graph/${HCG_PYMOD_FILE}
  xcuda/core/${HCG_PYMOD_FILE}
  other/${HCG_PYMOD_FILE}
  cuda/core/_not_callback.cpython-311-x86_64-linux-gnu.so
  cuda/core/${HCG_PYMOD_FILE}.orig)
set(HCG_PYMOD_OUTPUTS ${HCG_PYMOD_STRIPPED_DIR}/cuda/core/${HCG_PYMOD_FILE})
set(HCG_PYMOD_COMMANDS
  COMMAND ${CMAKE_COMMAND} -E make_directory ${HCG_PYMOD_STRIPPED_DIR}/cuda/core
  COMMAND ${CMAKE_OBJCOPY} --strip-all $<TARGET_FILE:hcg_fake_host_callback>
          ${HCG_PYMOD_STRIPPED_DIR}/cuda/core/${HCG_PYMOD_FILE})
foreach(copy IN LISTS HCG_PYMOD_COPIES)
  get_filename_component(dir ${HCG_PYMOD_DIR}/${copy} DIRECTORY)
  list(APPEND HCG_PYMOD_OUTPUTS ${HCG_PYMOD_DIR}/${copy})
  list(APPEND HCG_PYMOD_COMMANDS
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:hcg_fake_host_callback>
            ${HCG_PYMOD_DIR}/${copy})
endforeach()
add_custom_command(OUTPUT ${HCG_PYMOD_OUTPUTS} ${HCG_PYMOD_COMMANDS}
  DEPENDS hcg_fake_host_callback
  COMMENT "Copying and stripping the fake cuda.core module")
add_custom_target(hcg_fake_pymods ALL DEPENDS ${HCG_PYMOD_OUTPUTS})
# The stripped module, for the Python tests in tests/launcher.
set_property(GLOBAL PROPERTY HCG_PYMOD_STRIPPED_FILE
  ${HCG_PYMOD_STRIPPED_DIR}/cuda/core/${HCG_PYMOD_FILE})

set(HCG_PYMOD_DEFS
  HCG_PYMOD_DIR="${HCG_PYMOD_DIR}"
  HCG_PYMOD_STRIPPED_DIR="${HCG_PYMOD_STRIPPED_DIR}"
  HCG_PYMOD_FILE="${HCG_PYMOD_FILE}")

add_executable(test_config ${CMAKE_CURRENT_LIST_DIR}/test_config.c)
target_link_libraries(test_config PRIVATE hcg_core)
add_test(NAME test_config COMMAND test_config)

add_executable(test_elfsym ${CMAKE_CURRENT_LIST_DIR}/test_elfsym.c)
target_link_libraries(test_elfsym PRIVATE hcg_core)
target_compile_definitions(test_elfsym PRIVATE ${HCG_PYMOD_DEFS})
add_dependencies(test_elfsym hcg_fake_pymods)
add_test(NAME test_elfsym COMMAND test_elfsym)

# The same test as a non-PIE (ET_EXEC) program, whose st_values are absolute.
add_executable(test_elfsym_exec ${CMAKE_CURRENT_LIST_DIR}/test_elfsym.c)
target_link_libraries(test_elfsym_exec PRIVATE hcg_core)
target_compile_definitions(test_elfsym_exec PRIVATE ${HCG_PYMOD_DEFS} HCG_TEST_EXPECT_EXEC=1)
set_target_properties(test_elfsym_exec PROPERTIES POSITION_INDEPENDENT_CODE OFF)
target_compile_options(test_elfsym_exec PRIVATE -fno-pie)
target_link_options(test_elfsym_exec PRIVATE -no-pie)
add_dependencies(test_elfsym_exec hcg_fake_pymods)
add_test(NAME test_elfsym_exec COMMAND test_elfsym_exec)

add_executable(test_recognize ${CMAKE_CURRENT_LIST_DIR}/test_recognize.c)
target_link_libraries(test_recognize PRIVATE hcg_core)
target_compile_definitions(test_recognize PRIVATE ${HCG_PYMOD_DEFS})
add_dependencies(test_recognize hcg_fake_pymods)
add_test(NAME test_recognize COMMAND test_recognize)

set_tests_properties(test_config test_elfsym test_elfsym_exec test_recognize
  PROPERTIES LABELS unit)
