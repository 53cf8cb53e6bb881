# FP8 (issue 29): `ftx smoothquant --fp8` against the float64 export of tests/reference/fp8_reference.py,
# and `--fp8` / `--fp8-kv-cache` in generate, chat and eval-lambada. The engine_fp8_test gtests
# compare the CPU engine's logits with the float64 emulation at TP 1 (plain ctest) and here at TP 2
# under mpirun; fp8_test.py checks the export, the CLI and the bad inputs. Both need the test venv
# (FTX_TEST_PYTHON: ml_dtypes, the E4M3 conversions the references use).
foreach(part export cli sessions errors)
  add_test(NAME fp8_${part} COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/fp8_test.py ${part})
  set_tests_properties(fp8_${part} PROPERTIES FIXTURES_REQUIRED "engine_models;fp8_models"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600)
endforeach()
if(FTX_MPIRUN)
  ftx_mpirun(mpirun 2)
  add_test(NAME engine_fp8_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_fp8_test>)
  set_tests_properties(engine_fp8_mpi PROPERTIES FIXTURES_REQUIRED "engine_models;fp8_models"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600)
endif()
