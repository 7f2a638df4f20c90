# Fails if the runtime library depends on LLVM or MLIR shared libraries.
# Usage: cmake -DLIBRARY=<path> -P CheckNoLLVM.cmake
execute_process(COMMAND ldd ${LIBRARY}
  OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${LIBRARY} failed (${rc})")
endif()
if(deps MATCHES "lib(LLVM|MLIR|mlir)[^ ]*\\.so")
  message(FATAL_ERROR "${LIBRARY} links LLVM/MLIR:\n${deps}")
endif()
message(STATUS "${LIBRARY} links no LLVM/MLIR:\n${deps}")
