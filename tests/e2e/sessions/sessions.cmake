# Interactive sessions and ftx chat (issue 16): session rounds against fresh requests over the whole
# context (TP 1 and 2), their errors and resume, chat in a pipe and in a real terminal (tmux: its keys, a full context),
# sessions sharing prefix blocks (S-1), and the note that a chat_template is not applied (D13).
foreach(part rounds S1_prefix_order errors resume chat_pipe chat_tty chat_newlines chat_keys chat_full
             D13_chat_template)
  add_test(NAME sessions_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/sessions_test.py ${part})
  set_tests_properties(sessions_${part} PROPERTIES FIXTURES_REQUIRED engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e SKIP_RETURN_CODE 77)
endforeach()
if(FTX_MPIRUN)
  add_test(NAME sessions_rounds_tp COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/sessions_test.py rounds_tp)
  set_tests_properties(sessions_rounds_tp PROPERTIES FIXTURES_REQUIRED engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e)
endif()
