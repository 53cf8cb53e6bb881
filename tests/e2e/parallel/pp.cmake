# Pipeline parallelism (issue 17; pp_test.py): every TP x PP grid under mpirun equals one rank
# (GPT-2, GPT-2 with 5 layers, GPT-NeoX, BLOOM; greedy, beam 3, top-p, sessions with stop words and
# streaming), eval-lambada at 2 x 2, and the grid's errors. Fixtures: the 4-layer pp_models.
if(FTX_MPIRUN)
  foreach(model gpt2 gpt2_5 gptneox bloom)
    add_test(NAME pp_generate_${model} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/pp_test.py generate ${model})
    set_tests_properties(pp_generate_${model} PROPERTIES FIXTURES_REQUIRED pp_models ENVIRONMENT "${FTX_TEST_ENV}"
                         TIMEOUT 600 LABELS e2e)
  endforeach()
  foreach(part lambada errors)
    add_test(NAME pp_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/pp_test.py ${part})
    set_tests_properties(pp_${part} PROPERTIES FIXTURES_REQUIRED pp_models ENVIRONMENT "${FTX_TEST_ENV}"
                         TIMEOUT 600 LABELS e2e)
  endforeach()
  # The engine_pp_test gtest binary under 2 and 4 ranks: logits of every grid vs one rank (1e-5).
  foreach(np 2 4)
    ftx_mpirun(mpirun ${np} -x FTX_FIXTURES=${FTX_FIXTURES})
    add_test(NAME engine_pp_mpi_${np} COMMAND ${mpirun} $<TARGET_FILE:engine_pp_test>)
    set_tests_properties(engine_pp_mpi_${np} PROPERTIES FIXTURES_REQUIRED pp_models ENVIRONMENT "${FTX_TEST_ENV}"
                         TIMEOUT 300 LABELS e2e)
  endforeach()
  # CUDA: NCCL send/recv between stages; skips itself with fewer GPUs than its 2 ranks.
  add_test(NAME pp_cuda COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/pp_test.py cuda)
  set_tests_properties(pp_cuda PROPERTIES FIXTURES_REQUIRED pp_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77)
endif()
