# `ftx generate` on requests a user gets wrong and on a model whose activations overflow
# (requests_test.py).
foreach(part prompts non_finite)
  add_test(NAME requests_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/requests_test.py ${part})
  set_tests_properties(requests_${part} PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
endforeach()
