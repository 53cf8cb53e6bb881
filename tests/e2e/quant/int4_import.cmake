# GPTQ and AWQ import into INT4 (issue 50, int4_import_test.py): convert-hf of the committed
# fixtures (tests/fixtures/int4_import) at TP 1, 2 and 4, every rank's INT4 files against the
# producers' float64 dequantisation, exactly; the refused options by key and value.
foreach(part weights errors)
  add_test(NAME int4_import_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/int4_import_test.py ${part})
  set_tests_properties(int4_import_${part} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endforeach()
