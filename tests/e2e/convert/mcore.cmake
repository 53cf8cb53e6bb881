# Megatron Core checkpoints (issue 27; mcore_test.py): the committed fixtures of
# tests/fixtures/mcore/ (written by megatron-core, see tests/fixtures/mcore/SOURCE.md) through convert-megatron
# and convert-nemo, logits and greedy tokens against megatron-core's forward, folder identity
# across layouts and formats, the legacy Megatron layout and FT's converter, bad inputs.
foreach(part convert legacy errors)
  add_test(NAME mcore_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/mcore_test.py ${part})
  set_tests_properties(mcore_${part} PROPERTIES TIMEOUT 900
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_ARCH_ENGINE_TEST=$<TARGET_FILE:convert_arch_test>")
endforeach()
