# ftx tokenize on HuggingFace tokenizer.json files and XGLM's tokenizer, end to end
# (scripts/fixtures/hf_tokenizer_check.py): byte-level BPE tokenizer.json fixtures in GPT-NeoX's,
# BLOOM's and a RoBERTa-like layout against the independent Python reference
# scripts/fixtures/hf_tokenizer_reference.py over all LAMBADA texts and fuzz strings, and a
# SentencePiece model saved as sentencepiece.bpe.model against python3-sentencepiece plus HF's
# fairseq id offset (skipped, not passed, when the sentencepiece tools are missing).
foreach(check neox bloom prefix xglm)
  add_test(NAME tokenize_hf_${check}
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/hf_tokenizer_check.py ${check})
  set_tests_properties(tokenize_hf_${check} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" SKIP_RETURN_CODE 77
                       LABELS "tokenize" TIMEOUT 600)
endforeach()
