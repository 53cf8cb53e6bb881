# ftx tokenize, end to end (tokenize_test.py):
#   GPT-2 BPE against an independent Python encoder.py over all LAMBADA texts and 500 fuzz strings,
#   the error paths of the command, and SentencePiece models trained at test time against the
#   sentencepiece command-line tools (which scripts/setup installs: failed, not skipped, without them).
foreach(check gpt2 errors sentencepiece)
  add_test(NAME tokenize_${check}
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/tokenize_test.py ${check})
  set_tests_properties(tokenize_${check} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS "tokenize" TIMEOUT 300)
endforeach()
