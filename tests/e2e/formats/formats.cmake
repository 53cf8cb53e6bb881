# The format readers' unit tests need the formats_fixtures entry (fixtures.cmake: npy, safetensors,
# .nemo tar/tar.gz, written by numpy/torch/tarfile).
#
# The unit tests that use them (npy_test, safetensors_test, tar_archive_test) are discovered by
# gtest_discover_tests in tests/CMakeLists.txt, so their ctest names exist only at ctest time. The
# discovery writes each list into a variable <target>_TESTS inside an include file; the include
# file registered below runs after those and marks every discovered test FIXTURES_REQUIRED.
# A test binary run by hand generates the fixtures itself (tests/unit/format_fixtures.h).
#
# The same include file also sets the three variables these tests read. (gtest_discover_tests
# splits a list-valued `PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}"` at its semicolons, so only the
# first entry, FTX_BIN, reaches the discovered tests.)
set(_ftx_formats_require ${CMAKE_CURRENT_BINARY_DIR}/formats_require_fixtures.cmake)
file(WRITE ${_ftx_formats_require} "
foreach(_t npy_test safetensors_test tar_archive_test)
  if(\${_t}_TESTS)
    set_tests_properties(\${\${_t}_TESTS} PROPERTIES FIXTURES_REQUIRED ftx_formats_fixtures
      ENVIRONMENT \"FTX_FIXTURES=${FTX_FIXTURES};FTX_SOURCE_DIR=${CMAKE_SOURCE_DIR};FTX_TORCH_PYTHON=${FTX_TORCH_PYTHON}\")
  endif()
endforeach()
")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_ftx_formats_require})
