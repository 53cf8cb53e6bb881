# INT8 and FP8 accuracy on a trained model (issues 14 and 29): tests/accuracy/int8_accuracy_test.cc
# compares every INT8 and FP8 mode with fp32 on the held-out book of the trained_gpt2 fixture
# (fixtures.cmake).
# `ctest -L accuracy` runs it; the figures are in the test's output (ctest -V or --output-on-failure).
add_executable(int8_accuracy_test ${CMAKE_SOURCE_DIR}/tests/accuracy/int8_accuracy_test.cc
                                  ${CMAKE_SOURCE_DIR}/tests/test_env.cc)
target_compile_definitions(int8_accuracy_test PRIVATE FTX_TEST_BIN="$<TARGET_FILE:ftx>"
  FTX_TEST_FIXTURES="${FTX_FIXTURES}" FTX_TEST_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  FTX_TEST_TORCH_PYTHON="${FTX_TORCH_PYTHON}" FTX_TEST_VENV_PYTHON="${FTX_TEST_PYTHON}")
target_link_libraries(int8_accuracy_test PRIVATE ftx_runtime GTest::gtest_main)
add_test(NAME int8_accuracy_trained COMMAND $<TARGET_FILE:int8_accuracy_test>)
set_tests_properties(int8_accuracy_trained PROPERTIES FIXTURES_REQUIRED trained_gpt2 ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS accuracy TIMEOUT 900)
