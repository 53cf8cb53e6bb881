# `ftx eval-lambada` against an independent float64 PyTorch computation of both protocols
# (lambada_test.py).
add_test(NAME lambada_vs_torch COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/lambada_test.py)
set_tests_properties(lambada_vs_torch PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS e2e TIMEOUT 900)
