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
# `pipelines` (issue 46, I46): small tokenizers with Gemma's, Phi-3's, Phi-4-mini's and Qwen3's
# pipelines (scripts/fixtures/make_tokenizer_pipelines.py, the tok_pipelines_fx fixture below): ids
# and decodings of texts in other scripts, emoji, white space runs, digits, contractions, byte
# fallback and added tokens in the text against tokenizers (tokenizer.json), transformers'
# GemmaTokenizer and sentencepiece (Gemma's tokenizer.model).
# Under the pinned test venv (scripts/requirements/test.txt).
add_test(NAME tokenizer_pipeline_fixtures
         COMMAND ${FTX_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_tokenizer_pipelines.py
                 ${FTX_FIXTURES}/tokenizer_pipelines)
set_tests_properties(tokenizer_pipeline_fixtures PROPERTIES FIXTURES_SETUP tok_pipelines_fx ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS "tokenize" TIMEOUT 300)
foreach(check neox bloom prefix xglm trained modern llama)
  add_test(NAME hf_tokenizer_${check}
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_tokenizer_test.py ${check})
  set_tests_properties(hf_tokenizer_${check} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS "tokenize" TIMEOUT 600)
endforeach()
add_test(NAME hf_tokenizer_pipelines
         COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_tokenizer_test.py pipelines)
set_tests_properties(hf_tokenizer_pipelines PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS "tokenize" TIMEOUT 600
                     FIXTURES_REQUIRED tok_pipelines_fx)
