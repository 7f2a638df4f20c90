# Fails unless the runtime library exports exactly the functions its header
# declares: the C API, no internal C++ symbol.
# Usage: cmake -DLIBRARY=<path> -DHEADER=<runtime.h> -P CheckExports.cmake
execute_process(COMMAND nm -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D ${LIBRARY} failed (${rc})")
endif()
string(REGEX MATCHALL "[^ \n]+\n" lines "${symbols}")
set(exported "")
foreach(line ${lines})
  string(STRIP "${line}" name)
  list(APPEND exported ${name})
endforeach()
file(READ ${HEADER} header)
string(REGEX MATCHALL "[a-z_ *]+[ *](tailor_[a-z_0-9]+)\\(" declarations
       "${header}")
set(declared "")
foreach(declaration ${declarations})
  string(REGEX REPLACE ".*(tailor_[a-z_0-9]+)\\($" "\\1" name "${declaration}")
  list(APPEND declared ${name})
endforeach()
list(REMOVE_DUPLICATES declared)
list(SORT declared)
list(SORT exported)
if(NOT exported STREQUAL declared)
  message(FATAL_ERROR "${LIBRARY} exports\n  ${exported}\nbut ${HEADER} "
                      "declares\n  ${declared}")
endif()
list(LENGTH exported count)
message(STATUS "${LIBRARY} exports the ${count} functions of the C API only")
