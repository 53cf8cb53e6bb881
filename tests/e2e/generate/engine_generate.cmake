# `ftx generate` on the engine fixtures (issue 4; engine_generate_test.py): greedy tokens against
# the float64 references and the output fields (cli), bad inputs (errors), TP 2 under mpirun equal
# to one rank (tp). cpu_isa/cpu_isa.cmake runs the cli part again at each lower CPU level.
foreach(part cli errors)
  add_test(NAME engine_generate_${part}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/engine_generate_test.py ${part})
  set_tests_properties(engine_generate_${part} PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endforeach()

if(FTX_MPIRUN)
  add_test(NAME engine_generate_tp
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/engine_generate_test.py tp)
  set_tests_properties(engine_generate_tp PROPERTIES FIXTURES_REQUIRED engine_models
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endif()
