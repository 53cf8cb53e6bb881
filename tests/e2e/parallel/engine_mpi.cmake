# The engine's gtest binaries under `mpirun -np 2` (tests/unit/engine_{tp,session,half}_test.cc):
# their TwoRanks cases skip themselves under plain ctest discovery, and FTX_TEST_RANKS makes each
# binary fail unless it found its ranks (tests/mpi_ranks.cc).
if(FTX_MPIRUN)
  ftx_mpirun(mpirun 2)
  # Logits of TP=2 vs TP=1 (1e-5) and vs the reference.
  add_test(NAME engine_tp_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_tp_test>)
  # Sessions and the circular cache at TP 2.
  add_test(NAME engine_session_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_session_test>)
  set_tests_properties(engine_tp_mpi engine_session_mpi PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
  # fp16/bf16 weights on the CPU backend at TP 2 (engine_half_test's TwoRanks test).
  add_test(NAME engine_half_tp_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_half_test>
                                           --gtest_filter=HalfWeightsTensorParallel.*)
  set_tests_properties(engine_half_tp_mpi PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endif()
