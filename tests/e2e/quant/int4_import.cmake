# GPTQ and AWQ import into INT4 (issue 50, int4_import_test.py): convert-hf of the committed
# fixtures (tests/fixtures/int4_import) at TP 1, 2 and 4, every rank's INT4 files against the
# producers' float64 dequantisation, exactly; the engine's logits at TP 1 and 2 within 1e-4 of the
# dequantised model's float64 forward; the refused options by key and value.
foreach(part weights logits errors)
  add_test(NAME int4_import_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/int4_import_test.py ${part})
  set_tests_properties(int4_import_${part} PROPERTIES TIMEOUT 600
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_ARCH_ENGINE_TEST=$<TARGET_FILE:convert_arch_test>")
endforeach()
