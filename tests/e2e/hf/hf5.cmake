# convert-hf on transformers 5 checkpoints (issue 37; hf5_test.py): the committed
# fixtures of tests/fixtures/hf5/ (saved by transformers 5.23.0 with its float64 logits, see
# tests/fixtures/hf5/SOURCE.md) converted and run against those logits and greedy tokens at TP 1, 2 (and 4 for
# Llama's copied KV heads), config.ini's record of rope_parameters, the refused configurations.
foreach(part engine generate layouts errors)
  add_test(NAME hf5_${part} COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf5_test.py ${part})
  set_tests_properties(hf5_${part} PROPERTIES LABELS "hf" TIMEOUT 600
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_HF_GT_ENGINE_TEST=$<TARGET_FILE:hf_ground_truth_test>")
endforeach()
