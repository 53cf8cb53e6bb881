# Batch jobs at scale (issue 15): crash-safe resumable generate and eval-lambada, outputs to pipes,
# FIFOs and /dev/stdout, bounded memory over 100k prompts, per-request parameters, continuous
# batching, FT-compatible folders and up-front refusal of bad values (batch_jobs_test.py).
foreach(part resume streams rss mixed continuous tinyvocab badvalues)
  add_test(NAME batch_jobs_${part}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/batch_jobs_test.py ${part})
  set_tests_properties(batch_jobs_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
endforeach()
if(FTX_MPIRUN)
  add_test(NAME batch_jobs_tp COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/batch_jobs_test.py tp)
  set_tests_properties(batch_jobs_tp PROPERTIES FIXTURES_REQUIRED engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e)
endif()
