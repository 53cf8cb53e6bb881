# What loading and `ftx inspect --verify` find wrong in a model folder (verify_test.py): damaged
# weights, config.ini edits, manifest records. The key-by-key walk of config.ini is the gtest
# config_ini_check_test.
foreach(part weights configini records)
  add_test(NAME verify_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/verify_test.py ${part})
  set_tests_properties(verify_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
endforeach()
