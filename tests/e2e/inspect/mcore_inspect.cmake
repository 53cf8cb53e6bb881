# `ftx inspect` of the committed Megatron Core torch_dist checkpoints (mcore_inspect_test.py).
add_test(NAME mcore_inspect_list COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/mcore_inspect_test.py list)
set_tests_properties(mcore_inspect_list PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
