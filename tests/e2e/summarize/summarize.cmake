# `ftx rouge` and `ftx eval-summarize` (issue 49) against Google's rouge_score, pinned in
# scripts/requirements/rouge.txt (a venv of its own made by scripts/pyenv at configure time, over
# Debian's python3; the test venv stays as it is), on a tiny GPT-2 the test writes and converts.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/scripts/requirements/rouge.txt)
execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/pyenv rouge OUTPUT_VARIABLE FTX_ROUGE_PYTHON
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rouge_pyenv_rc)
if(NOT rouge_pyenv_rc EQUAL 0)
  message(FATAL_ERROR "scripts/pyenv rouge failed (exit ${rouge_pyenv_rc}): the summarize test needs it")
endif()
add_test(NAME summarize_vs_rouge_score COMMAND ${FTX_ROUGE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/summarize_test.py)
set_tests_properties(summarize_vs_rouge_score PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS e2e TIMEOUT 900)
