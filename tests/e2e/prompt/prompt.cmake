# Prompt learning (issue 13): `ftx prompt-convert`, convert-nemo --prompt-in-file, p-tuning in
# generate / eval-lambada. Archives (the prompt_fx fixture) and references:
# scripts/fixtures/make_prompt_fixtures.py, tests/reference/prompt_reference.py; the engine
# logits: tests/unit/engine_prompt_test.cc, here at TP 2 under mpirun.
# soft, soft_errors: FT's soft prompts given with a request (issue 49), against the float64
# reference over the rows (soft needs mpirun for its TP 2 and PP 2 runs).
foreach(part convert generate errors soft_errors)
  add_test(NAME prompt_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/prompt_test.py ${part})
  set_tests_properties(prompt_${part} PROPERTIES FIXTURES_REQUIRED "prompt_fx;engine_models;convert_fx"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600)
endforeach()

if(FTX_MPIRUN)
  add_test(NAME prompt_soft COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/prompt_test.py soft)
  set_tests_properties(prompt_soft PROPERTIES FIXTURES_REQUIRED "prompt_fx;engine_models"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600)
  ftx_mpirun(mpirun 2)
  add_test(NAME engine_prompt_mpi COMMAND ${mpirun} $<TARGET_FILE:engine_prompt_test>)
  set_tests_properties(engine_prompt_mpi PROPERTIES FIXTURES_REQUIRED "prompt_fx;engine_models"
                       ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endif()
