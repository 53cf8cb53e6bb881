# Every example in README.md and docs/*.md runs as printed (issue 39; tests/e2e/docs_test.py): each
# ```sh block on the demo's trained model and the converter tests' tiny checkpoints; blocks that need
# a GPU, several nodes, Slurm or minutes of benchmarks are marked in the page and listed as skipped.
add_test(NAME docs_examples COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/docs_test.py)
set_tests_properties(docs_examples PROPERTIES
                     FIXTURES_REQUIRED "trained_gpt2;convert_fx;arch_fx;prompt_fx;engine_models"
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 900 LABELS e2e)
