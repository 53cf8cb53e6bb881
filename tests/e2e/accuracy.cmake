# INT8 accuracy on a trained model (issue 14): a small GPT-2 trained on the KJV Bible
# (scripts/make_trained_gpt2.py, ~4 minutes alone on 2 cores the first time, 13 beside the rest
# of the suite, then cached by its STAMP in ~/.cache/ftx/trained-gpt2, which a clean clone's run
# copies from), converted and SmoothQuant-exported (alpha 0 and 0.5), then
# tests/accuracy/int8_accuracy_test.cc compares every INT8 mode with fp32 on the held-out book.
# `ctest -L accuracy` runs it; the figures are in the test's output (ctest -V or --output-on-failure).
add_test(NAME trained_gpt2_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_trained_fixtures.py
                 ${FTX_FIXTURES}/trained)
# COST: started first, so that the rest of the suite runs beside it; TIMEOUT: 759 s in CI, and a
# busier machine has taken over 900.
set_tests_properties(trained_gpt2_fixtures PROPERTIES FIXTURES_SETUP trained_gpt2 ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS accuracy TIMEOUT 2400 COST 10000)

add_executable(int8_accuracy_test ${CMAKE_SOURCE_DIR}/tests/accuracy/int8_accuracy_test.cc
                                  ${CMAKE_SOURCE_DIR}/tests/test_env.cc)
target_compile_definitions(int8_accuracy_test PRIVATE FTX_TEST_BIN="$<TARGET_FILE:ftx>"
  FTX_TEST_FIXTURES="${FTX_FIXTURES}" FTX_TEST_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  FTX_TEST_TORCH_PYTHON="${FTX_TORCH_PYTHON}" FTX_TEST_VENV_PYTHON="${FTX_TEST_PYTHON}")
target_link_libraries(int8_accuracy_test PRIVATE ftx_runtime GTest::gtest_main)
add_test(NAME int8_accuracy_trained COMMAND $<TARGET_FILE:int8_accuracy_test>)
set_tests_properties(int8_accuracy_trained PROPERTIES FIXTURES_REQUIRED trained_gpt2 ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS accuracy TIMEOUT 900)
