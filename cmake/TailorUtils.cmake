# TailorUtils.cmake: helpers shared by every tailor target (warnings, unit tests).

include(GoogleTest)

# Our own code builds with warnings as errors; third-party headers are SYSTEM.
function(tailor_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wno-unused-parameter>)
  if(TAILOR_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
  endif()
endfunction()

# add_tailor_unittest(<name> SOURCES <files...> [LIBS <targets...>])
#
# The one way to add a GoogleTest binary: it links gtest_main, gets our
# warnings, and registers every TEST() with ctest under the label `unit`, so
# GoogleTest results appear one by one in ctest's summary.
function(add_tailor_unittest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  find_package(GTest REQUIRED)
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main ${ARG_LIBS})
  tailor_target_warnings(${name})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/test/unit)
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    TEST_PREFIX "unit."
    PROPERTIES LABELS "unit;${ARG_LABELS}")
  set_property(GLOBAL APPEND PROPERTY TAILOR_UNITTESTS ${name})
endfunction()
