# GPT-J, GPT-NeoX, BLOOM, OPT and XGLM end to end (issue 5; tests/e2e/arch_test.py): tiny HF
# checkpoints written by PyTorch, byte compatibility with FT's converters as the spec describes
# them, logits and greedy tokens against float64 references at TP 1 and 2, eval-lambada, errors.
add_test(NAME arch_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_arch_fixtures.py ${FTX_FIXTURES}/arch)
set_tests_properties(arch_fixtures PROPERTIES FIXTURES_SETUP arch_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

foreach(part compat engine lambada errors)
  add_test(NAME arch_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/arch_test.py ${part})
  set_tests_properties(arch_${part} PROPERTIES FIXTURES_REQUIRED arch_fx TIMEOUT 600
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_ARCH_ENGINE_TEST=$<TARGET_FILE:convert_arch_test>")
endforeach()
