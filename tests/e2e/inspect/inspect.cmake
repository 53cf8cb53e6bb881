# `ftx inspect --stats --json` against torch's own listing of every input kind, and bad inputs
# (inspect_test.py).
add_test(NAME inspect_vs_torch COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/inspect_test.py)
set_tests_properties(inspect_vs_torch PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS e2e TIMEOUT 300)
