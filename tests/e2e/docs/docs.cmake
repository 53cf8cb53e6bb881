# README.md, docs/*.md and man/*.1 against what ftx does (docs_test.py). docs_examples
# (issue 39): every ```sh block, the pages in order in one folder, on the demo's trained model and
# the converter tests' tiny checkpoints; blocks that need a GPU, several nodes, Slurm or minutes of
# benchmarks are marked in the page and listed as skipped. docs_pages: each page's outputs are
# named for it (no page writes over another's or an input) and docs/converters.md lists every
# architecture convert-hf reads. docs_help: every flag and alias of each --help is in its man page.
add_test(NAME docs_examples COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/docs_test.py examples)
set_tests_properties(docs_examples PROPERTIES
                     FIXTURES_REQUIRED "trained_gpt2;convert_fx;arch_fx;prompt_fx;engine_models"
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 900 LABELS e2e)
foreach(mode pages help)
  add_test(NAME docs_${mode} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/docs_test.py ${mode})
  set_tests_properties(docs_${mode} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 120 LABELS e2e)
endforeach()
