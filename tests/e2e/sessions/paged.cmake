# The paged KV cache (issue 28) through ftx generate and chat: a fixed --kv-cache-memory budget
# gives the auto cache's results (sampling, beams, streaming, sessions, --memory-len, --resume),
# at TP 2 too; its flag errors.
foreach(part budget errors)
  add_test(NAME paged_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/paged_test.py ${part})
  set_tests_properties(paged_${part} PROPERTIES FIXTURES_REQUIRED engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e)
endforeach()
if(FTX_MPIRUN)
  add_test(NAME paged_tp COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/paged_test.py tp)
  set_tests_properties(paged_tp PROPERTIES FIXTURES_REQUIRED "engine_models;pp_models" ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e)
endif()
