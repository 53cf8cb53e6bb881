# Converter end-to-end tests (convert_test.py): the convert_fx fixtures made by real PyTorch, byte
# compatibility with scripts/reference/ft_converters_ref.py, round trips, bad inputs.
foreach(kind megatron nemo hf)
  add_test(NAME convert_compat_${kind}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/convert_test.py compat ${kind})
  set_tests_properties(convert_compat_${kind} PROPERTIES FIXTURES_REQUIRED convert_fx ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 900)
endforeach()
add_test(NAME convert_roundtrip COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/convert_test.py roundtrip)
add_test(NAME convert_errors COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/convert_test.py errors)
set_tests_properties(convert_roundtrip convert_errors PROPERTIES FIXTURES_REQUIRED convert_fx
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 900)
