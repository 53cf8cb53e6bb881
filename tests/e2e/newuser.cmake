# What a new user trips over (issue 25): each mistake with its bad input, the one-line error (or the
# right behaviour) and nothing clobbered or left behind (tests/e2e/newuser_test.py). The key-by-key
# walk of config.ini is the gtest config_ini_check_test.
foreach(part paths weights configini prompts flags spellings chat_pipe chat_tty interrupt)
  add_test(NAME newuser_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/newuser_test.py ${part})
  set_tests_properties(newuser_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e SKIP_RETURN_CODE 77)
endforeach()
