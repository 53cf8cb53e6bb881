# Converter end-to-end tests (tests/e2e/convert_test.py): fixtures made by real PyTorch, byte
# compatibility with scripts/reference/ft_converters_ref.py, round trips, bad inputs.
add_test(NAME convert_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_convert_fixtures.py ${FTX_FIXTURES}/convert)
set_tests_properties(convert_fixtures PROPERTIES FIXTURES_SETUP convert_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

foreach(kind megatron nemo hf)
  add_test(NAME convert_compat_${kind}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/convert_test.py compat ${kind})
  set_tests_properties(convert_compat_${kind} PROPERTIES FIXTURES_REQUIRED convert_fx ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 900)
endforeach()
add_test(NAME convert_roundtrip COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/convert_test.py roundtrip)
add_test(NAME convert_errors COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/convert_test.py errors)
set_tests_properties(convert_roundtrip convert_errors PROPERTIES FIXTURES_REQUIRED convert_fx
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 900)
