# SmoothQuant W8A8 (issue 14, `--int8-mode 2`): the w8a8_models fixture holds `ftx smoothquant`
# folders of the engine fixtures and the float64 emulation's outputs
# (scripts/fixtures/make_w8a8_fixtures.py); the engine_w8a8_test gtests compare against them at
# TP 1 (plain ctest) and here at TP 2 under mpirun; w8a8_test.py checks the CLI (all modes run,
# greedy tokens, bad input).
add_test(NAME w8a8_e2e COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/w8a8_test.py)
set_tests_properties(w8a8_e2e PROPERTIES FIXTURES_REQUIRED "engine_models;w8a8_models"
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
if(FTX_MPIRUN)
  ftx_mpirun(mpirun 2)
  add_test(NAME engine_w8a8_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_w8a8_test>)
  set_tests_properties(engine_w8a8_mpi PROPERTIES FIXTURES_REQUIRED "engine_models;w8a8_models"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endif()
