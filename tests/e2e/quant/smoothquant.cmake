# `ftx smoothquant` (issue 14): calibration, smoothing and TensorRT-LLM's INT8 files against the
# float64 reference tests/reference/smoothquant_reference.py, on the engine fixtures.
foreach(part reference ranges arch gqa errors)
  add_test(NAME smoothquant_${part}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/smoothquant_test.py ${part})
  set_tests_properties(smoothquant_${part} PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endforeach()
add_test(NAME smoothquant_convert COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/smoothquant_test.py convert)
set_tests_properties(smoothquant_convert PROPERTIES FIXTURES_REQUIRED "engine_models;convert_fx"
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
