# Ground truth from HuggingFace transformers (issue 26; hf_ground_truth_test.py): tiny
# models of every architecture convert-hf reads, built by transformers' from_config and saved by its
# save_pretrained in every layout (the hf_gt_fx fixture, scripts/fixtures/make_hf_ground_truth.py),
# against transformers' own float64 logits, greedy and beam search, sampling distributions and refusals.
foreach(part layouts engine generate errors)
  add_test(NAME hf_gt_${part}
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_ground_truth_test.py ${part})
  set_tests_properties(hf_gt_${part} PROPERTIES FIXTURES_REQUIRED hf_gt_fx LABELS "hf" TIMEOUT 900
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_HF_GT_ENGINE_TEST=$<TARGET_FILE:hf_ground_truth_test>")
endforeach()
