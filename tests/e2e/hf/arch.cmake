# GPT-J, GPT-NeoX, BLOOM, OPT and XGLM end to end (issue 5; arch_test.py): the tiny HF checkpoints
# of the arch_fx fixture (written by PyTorch), byte compatibility with FT's converters as the spec
# describes them, logits and greedy tokens against float64 references at TP 1 and 2, eval-lambada, errors.
foreach(part compat engine lambada errors)
  add_test(NAME arch_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/arch_test.py ${part})
  set_tests_properties(arch_${part} PROPERTIES FIXTURES_REQUIRED arch_fx TIMEOUT 600
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_ARCH_ENGINE_TEST=$<TARGET_FILE:convert_arch_test>")
endforeach()
