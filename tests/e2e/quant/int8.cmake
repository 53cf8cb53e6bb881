# Weight-only INT8 (issue 14, `--int8-mode 1`; int8_test.py): generate's greedy tokens against the
# float64 emulation at TP 1 and 2, usage errors, eval-lambada.
add_test(NAME int8_weight_only_e2e COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/int8_test.py)
set_tests_properties(int8_weight_only_e2e PROPERTIES FIXTURES_REQUIRED engine_models
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
