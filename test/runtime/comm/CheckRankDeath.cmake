# Runs COMMAND (an mpirun line in which one rank dies) and checks that the
# job ends within 60 seconds, fails, and says EXPECT (which rank died).
# cmake -DCOMMAND=<list> -DEXPECT=<text> -P CheckRankDeath.cmake
string(TIMESTAMP start "%s")
execute_process(COMMAND ${COMMAND}
  TIMEOUT 60
  RESULT_VARIABLE result
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
string(TIMESTAMP stop "%s")
math(EXPR seconds "${stop} - ${start}")
message(STATUS "exit: ${result} after ${seconds} s\n${out}${err}")
if(result MATCHES "timeout")
  message(FATAL_ERROR "the job was still running after 60 s: a rank hangs")
endif()
if(result EQUAL 0)
  message(FATAL_ERROR "the job succeeded although a rank was killed")
endif()
string(FIND "${out}${err}" "${EXPECT}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "the output does not name the lost rank ('${EXPECT}')")
endif()
