# ftx tokenize on HuggingFace tokenizer.json files and XGLM's tokenizer, end to end
# (hf_tokenizer_test.py): byte-level BPE tokenizer.json fixtures in GPT-NeoX's,
# BLOOM's and a RoBERTa-like layout against the independent Python reference
# scripts/fixtures/hf_tokenizer_reference.py and HuggingFace tokenizers itself over all LAMBADA
# texts and fuzz strings; tokenizer.json files trained by tokenizers in NeoX's and BLOOM's style
# against transformers' GPTNeoXTokenizerFast / BloomTokenizerFast (`trained`); and a SentencePiece
# model saved as sentencepiece.bpe.model against python3-sentencepiece plus HF's fairseq id offset
# and transformers' XGLMTokenizer (failed, not skipped, without the sentencepiece tools scripts/setup installs);
# `modern`: tokenizer.json files trained with Llama 3's and Qwen2's settings (Split regex) and a
# SentencePiece model with Llama 2's (byte fallback) against tokenizers / transformers' LlamaTokenizer;
# `llama`: Llama 2-style folders made by transformers (tokenizer.model alone, saved by LlamaTokenizer
# with legacy false / true, and with LlamaTokenizerFast's tokenizer.json beside it): K2, special
# tokens typed in the text with tokenizer.model, against LlamaTokenizer; K3, tokenizer.json chosen
# over tokenizer.model, against AutoTokenizer.
# Under the pinned test venv (scripts/requirements/test.txt).
foreach(check neox bloom prefix xglm trained modern llama)
  add_test(NAME hf_tokenizer_${check}
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_tokenizer_test.py ${check})
  set_tests_properties(hf_tokenizer_${check} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS "tokenize" TIMEOUT 600)
endforeach()
