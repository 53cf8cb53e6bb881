# The key tables of man ftx-convert-hf (each family's KeyRule table, lib/convert/hf/) held to what
# convert-hf does on the transformers-5 checkpoints of tests/fixtures/hf5 (key_tables_test.py): a key
# "not part of the math" changes no file, a key "read" changes the folder or is refused.
add_test(NAME hf_key_tables COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/key_tables_test.py)
set_tests_properties(hf_key_tables PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS "hf")
