# fp16/bf16 weights on the CPU backend at TP 2: the engine_half_test binary under two ranks
# (its TwoRanks test; the others run under plain ctest discovery).
if(FTX_MPIRUN)
  ftx_mpirun(mpirun 2)
  add_test(NAME engine_half_tp_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_half_test>
                                           --gtest_filter=HalfWeightsTensorParallel.*)
  set_tests_properties(engine_half_tp_mpi PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endif()
