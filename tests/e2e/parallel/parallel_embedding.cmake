# Vocabulary-parallel embedding (issue 49; parallel_embedding_test.py): --use-parallel-embedding with
# --embedding-sharding-dim 0 and 1 and --use-embedding-sharing under mpirun at TP 2 and 4 give the
# tokens (and log probs within 1e-5) of one rank, with the per-rank table bytes --verbose prints, on
# the engine fixtures' GPT-2 and GPT-J (written by their maker here) and a tiny transformers Llama,
# tied and untied; eval-lambada with the same flags; and the bad flag combinations are refused by name.
if(FTX_MPIRUN)
  foreach(part engine hf errors)
    add_test(NAME parallel_embedding_${part}
             COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/parallel_embedding_test.py ${part})
    set_tests_properties(parallel_embedding_${part} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 900 LABELS e2e)
  endforeach()
  # eval-lambada with the same flags, on the pp fixtures' GPT-2 with GPT-2's vocabulary.
  add_test(NAME parallel_embedding_lambada
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/parallel_embedding_test.py lambada)
  set_tests_properties(parallel_embedding_lambada PROPERTIES FIXTURES_REQUIRED pp_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e)
endif()
