# Every subcommand's flags as a user mistypes them (flags_test.py): bad values, the cross-flag rules,
# FasterTransformer's, TensorRT-LLM's and vLLM's spellings; one-line errors, nothing written.
foreach(part values generate ft_spellings peer_spellings)
  add_test(NAME flags_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/flags_test.py ${part})
  set_tests_properties(flags_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
endforeach()
