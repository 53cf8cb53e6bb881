# The converters on the inputs a user gets wrong (inputs_test.py): paths, interrupted conversions,
# the pickle allow-list's TransformerEngine and pathlib entries, values no FT file may hold.
# Megatron Core's tied output layer is in mcore_test.py errors.
foreach(part paths interrupt allowlist values)
  add_test(NAME inputs_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/inputs_test.py ${part})
  set_tests_properties(inputs_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
endforeach()
