# The Llama family (issue 37) through the rest of ftx's run-time features: weight-only INT8,
# sessions, the paged prefix cache and eval-lambada on convert-hf folders of Llama/Qwen2 checkpoints,
# each against a reference the suite already has (llama_family_test.py); `reference`
# checks that reference (tests/reference/hf_arch_reference.py) against transformers 5's float64
# logits of tests/fixtures/hf5. Test venv: transformers 4.45.2 writes the tiny Llama of the lambada part.
foreach(part reference weight_only sessions prefix lambada moe_beams)
  add_test(NAME llama_family_${part} COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/llama_family_test.py ${part})
  set_tests_properties(llama_family_${part} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300 LABELS e2e)
endforeach()
