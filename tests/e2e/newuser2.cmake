# What a second new user tripped over (issue 38): each case with its bad input and the error or
# behaviour wanted (tests/e2e/newuser2_test.py). The scheduler's progress under a KV-cache budget
# is the gtest scheduler_progress_test; Megatron Core's tied output layer is in mcore_test.py errors.
foreach(part logits inspect verify flags spellings allowlist convert chat_tty)
  add_test(NAME newuser2_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/newuser2_test.py ${part})
  set_tests_properties(newuser2_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e SKIP_RETURN_CODE 77)
endforeach()
