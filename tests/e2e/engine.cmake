# Engine and `ftx generate` (issue 4): fixture models with float64 reference outputs, CLI checks,
# tensor parallelism under mpirun. The gtest units (tests/unit/engine_*_test.cc) make the same
# fixtures themselves on first use when this setup test has not run.
set(FTX_ENGINE_FIXTURE_SCRIPT ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_engine_models.py)

add_test(NAME engine_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${FTX_ENGINE_FIXTURE_SCRIPT} ${FTX_FIXTURES}/engine)
set_tests_properties(engine_fixtures PROPERTIES FIXTURES_SETUP engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                     TIMEOUT 300)

foreach(part cli errors)
  add_test(NAME engine_generate_${part}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/engine_generate_test.py ${part})
  set_tests_properties(engine_generate_${part} PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endforeach()

if(FTX_HAVE_MPI)
  find_program(FTX_MPIRUN NAMES mpirun mpiexec)
  if(FTX_MPIRUN)
    add_test(NAME engine_generate_tp
             COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/engine_generate_test.py tp)
    set_tests_properties(engine_generate_tp PROPERTIES FIXTURES_REQUIRED engine_models
                         ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
    # The engine_tp_test gtest binary under two ranks: logits of TP=2 vs TP=1 (1e-5) and vs reference.
    ftx_mpirun(mpirun 2)
    add_test(NAME engine_tp_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_tp_test>)
    set_tests_properties(engine_tp_mpi PROPERTIES FIXTURES_REQUIRED engine_models
                         ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
    # Sessions and the circular cache at TP 2: the engine_session_test binary under two ranks.
    add_test(NAME engine_session_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_session_test>)
    set_tests_properties(engine_session_mpi PROPERTIES FIXTURES_REQUIRED engine_models
                         ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
  endif()
endif()
