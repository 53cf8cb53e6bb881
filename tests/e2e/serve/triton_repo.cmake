# `ftx triton-repo` (issue 39): the written config.pbtxt parsed by Triton's own ModelConfig protobuf
# (tritonclient's model_config_pb2, pinned in scripts/requirements/triton.txt, a venv of its own made
# by scripts/pyenv at configure time) and checked against FasterTransformer's backend tables.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/scripts/requirements/triton.txt)
execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/pyenv triton OUTPUT_VARIABLE FTX_TRITON_PYTHON
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE triton_pyenv_rc)
if(NOT triton_pyenv_rc EQUAL 0)
  message(FATAL_ERROR "scripts/pyenv triton failed (exit ${triton_pyenv_rc}): the triton-repo test needs it")
endif()
add_test(NAME triton_repo COMMAND ${FTX_TRITON_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/triton_repo_test.py)
set_tests_properties(triton_repo PROPERTIES FIXTURES_REQUIRED engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                     TIMEOUT 120 LABELS e2e)
