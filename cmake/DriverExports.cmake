# The driver's entry points, which libhcguard exports (src/intercept/thunk.c) so that
# a program linked with -lcuda reaches a thunk whatever it calls. The list
# is every function the CUDA toolkit's stub libcuda.so defines, read with nm
# at configure time into ${HCG_GENERATED_DIR}/hcg_driver_exports.h.
# Without the stub (or nm) the list is empty and libhcguard exports only its
# own wrappers. -DHCGUARD_CUDA_STUB=PATH names the stub; OFF disables this.
#
# Sets HCG_N_DRIVER_EXPORTS and HCG_DRIVER_EXPORT_NAMES (a sorted list).

set(HCG_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)

function(hcg_stub_dirs out)
  set(dirs "")
  get_filename_component(inc_root "${HCGUARD_CUDA_INCLUDE}/.." ABSOLUTE)
  foreach(root "${HCGUARD_CUDA_ROOT}" "$ENV{CUDA_HOME}" "${inc_root}")
    if(root STREQUAL "")
      continue()
    endif()
    list(APPEND dirs ${root}/lib64/stubs ${root}/lib/stubs
      ${root}/targets/${CMAKE_SYSTEM_PROCESSOR}-linux/lib/stubs)
    if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
      list(APPEND dirs ${root}/targets/sbsa-linux/lib/stubs)
    endif()
    file(GLOB more LIST_DIRECTORIES true ${root}/targets/*/lib/stubs)
    list(APPEND dirs ${more})
  endforeach()
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

# The cu* functions the stub defines, from `nm -D --defined-only`.
function(hcg_stub_names stub out)
  set(nm ${CMAKE_NM})
  if(NOT nm)
    find_program(HCG_NM nm)
    set(nm ${HCG_NM})
  endif()
  set(names "")
  if(nm)
    execute_process(COMMAND ${nm} -D --defined-only ${stub}
      OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0)
      string(REPLACE "\n" ";" lines "${text}")
      foreach(line IN LISTS lines)
        if(line MATCHES "^[0-9a-fA-F]* +[TWi] +(cu[A-Za-z0-9_]+)(@.*)?$")
          list(APPEND names ${CMAKE_MATCH_1})
        endif()
      endforeach()
    endif()
  endif()
  list(REMOVE_DUPLICATES names)
  list(SORT names)
  set(${out} ${names} PARENT_SCOPE)
endfunction()

hcg_stub_dirs(_hcg_stub_dirs)
find_file(HCGUARD_CUDA_STUB libcuda.so HINTS ${_hcg_stub_dirs} NO_DEFAULT_PATH
  DOC "The CUDA toolkit's stub libcuda.so, whose functions libhcguard exports (OFF: none)")

set(HCG_DRIVER_EXPORT_NAMES "")
if(HCGUARD_CUDA_STUB AND EXISTS "${HCGUARD_CUDA_STUB}")
  hcg_stub_names(${HCGUARD_CUDA_STUB} HCG_DRIVER_EXPORT_NAMES)
  # A changed toolkit changes the list.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${HCGUARD_CUDA_STUB})
endif()
list(LENGTH HCG_DRIVER_EXPORT_NAMES HCG_N_DRIVER_EXPORTS)
if(HCG_N_DRIVER_EXPORTS GREATER 0)
  message(STATUS "hcguard: exporting ${HCG_N_DRIVER_EXPORTS} driver entry points of ${HCGUARD_CUDA_STUB}")
else()
  message(STATUS "hcguard: no driver entry points to export (stub libcuda.so not found or "
    "unreadable: ${HCGUARD_CUDA_STUB}); a program linked with -lcuda that calls a driver "
    "function hcguard does not wrap, inside a host function, will not be seen")
endif()

if(HCG_N_DRIVER_EXPORTS GREATER 0)
  set(_from "${HCGUARD_CUDA_STUB}")
else()
  set(_from "nothing (no stub libcuda.so)")
endif()
set(_text "/* Generated at configure time by cmake/DriverExports.cmake from\n")
string(APPEND _text " * ${_from}. Do not edit. */\n")
string(APPEND _text "#define HCG_N_DRIVER_EXPORTS ${HCG_N_DRIVER_EXPORTS}\n")
string(APPEND _text "#define HCG_DRIVER_EXPORTS(X)")
set(_i 0)
foreach(name IN LISTS HCG_DRIVER_EXPORT_NAMES)
  string(APPEND _text " \\\n    X(${_i}, ${name})")
  math(EXPR _i "${_i} + 1")
endforeach()
string(APPEND _text "\n")
# Rewritten only when it changes, so a re-configure rebuilds nothing.
file(WRITE ${HCG_GENERATED_DIR}/hcg_driver_exports.h.new "${_text}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different
  ${HCG_GENERATED_DIR}/hcg_driver_exports.h.new ${HCG_GENERATED_DIR}/hcg_driver_exports.h)
