# INT8 KV cache (issue 14, `--int8-kv-cache`; int8_kv_test.py): greedy tokens against the float64
# emulation at TP 1 and 2 with fp32 and int8_mode 1 weights, sessions/beams/continuous batching
# against fresh requests, missing scale files, and smoothquant --calibrate-kv-cache feeding
# generate, eval-lambada and chat.
foreach(part emulation sessions errors pipeline)
  add_test(NAME int8_kv_cache_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/int8_kv_test.py ${part})
  set_tests_properties(int8_kv_cache_${part} PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600)
endforeach()
