# `ftx eval-lambada` against an independent float64 PyTorch computation of both protocols.
add_test(NAME eval_lambada_vs_torch
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/lambada_test.py)
set_tests_properties(eval_lambada_vs_torch PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS e2e TIMEOUT 900)
