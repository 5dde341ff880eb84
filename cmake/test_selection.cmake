# A build that runs only some of the C++ tests (`make test-tsan` runs the thread tests)
# need not compile the others: with KILN_TEST_NAME_REGEX set, kiln_tests is built from
# the test sources that define at least one test whose `TEST(Suite, Name)` line matches
# it, plus the helper sources that define no test. Included from CMakeLists.txt, where
# it filters KILN_TEST_SOURCES in place.
set(KILN_TEST_NAME_REGEX "" CACHE STRING
    "Build kiln_tests only from the test sources with a TEST(Suite, Name) matching this regex (empty: all)")

if(KILN_TEST_NAME_REGEX)
  set(selected)
  foreach(source ${KILN_TEST_SOURCES})
    file(STRINGS ${source} defined REGEX "^TEST(_F|_P)?\\(")
    file(STRINGS ${source} matching REGEX "^TEST(_F|_P)?\\([^)]*(${KILN_TEST_NAME_REGEX})")
    if(NOT defined OR matching)
      list(APPEND selected ${source})
    endif()
  endforeach()
  # CMake re-runs when any test source changes (CONFIGURE_DEPENDS alone notices new files
  # only), so a test renamed into or out of the selection is picked up.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KILN_TEST_SOURCES})
  list(LENGTH KILN_TEST_SOURCES all_count)
  list(LENGTH selected selected_count)
  message(STATUS "kiln_tests: ${selected_count} of ${all_count} test sources (KILN_TEST_NAME_REGEX)")
  set(KILN_TEST_SOURCES ${selected})
endif()
