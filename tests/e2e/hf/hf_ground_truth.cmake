# Ground truth from HuggingFace transformers (hf_ground_truth_test.py): convert-hf and the engine
# against transformers' own float64 logits, greedy paths and refusals, one entry per part and set of
# models. tf4: every architecture convert-hf reads, built by transformers 4's from_config and saved in
# every save_pretrained layout (the hf_gt_fx fixture, scripts/fixtures/make_hf_ground_truth.py), with
# beam search and sampling distributions; tf5: the committed fixtures of tests/fixtures/hf5/ (saved
# by transformers 5.23.0, see tests/fixtures/hf5/SOURCE.md) with transformers 5's config keys.
foreach(part layouts engine generate errors)
  add_test(NAME hf_ground_truth_${part}.tf4
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_ground_truth_test.py ${part} tf4)
  set_tests_properties(hf_ground_truth_${part}.tf4 PROPERTIES FIXTURES_REQUIRED hf_gt_fx LABELS "hf" TIMEOUT 900
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_HF_GT_ENGINE_TEST=$<TARGET_FILE:hf_ground_truth_test>")
  add_test(NAME hf_ground_truth_${part}.tf5
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_ground_truth_test.py ${part} tf5)
  set_tests_properties(hf_ground_truth_${part}.tf5 PROPERTIES LABELS "hf" TIMEOUT 600
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_HF_GT_ENGINE_TEST=$<TARGET_FILE:hf_ground_truth_test>")
endforeach()
