# The fixtures the e2e suites share: each a ctest entry that writes its inputs under
# ${FTX_FIXTURES}/<name> (FIXTURES_SETUP <fixture>), run once before any entry that names the
# fixture in FIXTURES_REQUIRED. The makers are scripts/fixtures/make_*.py.

# Engine models of every architecture with float64 reference outputs. The gtest units
# (tests/unit/engine_*_test.cc) make the same fixtures themselves on first use when this has not run.
add_test(NAME engine_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_engine_models.py ${FTX_FIXTURES}/engine)
set_tests_properties(engine_fixtures PROPERTIES FIXTURES_SETUP engine_models ENVIRONMENT "${FTX_TEST_ENV}"
                     TIMEOUT 300)

# Megatron, NeMo and HF GPT-2 checkpoints written by real PyTorch, with the unsplit FT tensors.
add_test(NAME convert_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_convert_fixtures.py ${FTX_FIXTURES}/convert)
set_tests_properties(convert_fixtures PROPERTIES FIXTURES_SETUP convert_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

# GPT-J, GPT-NeoX, BLOOM, OPT and XGLM checkpoints written by PyTorch with HF's config keys and names.
add_test(NAME arch_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_arch_fixtures.py ${FTX_FIXTURES}/arch)
set_tests_properties(arch_fixtures PROPERTIES FIXTURES_SETUP arch_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

# Models built and saved by transformers 4 itself, with its float64 logits (under the pinned test
# venv; remade only when the script, scripts/requirements/test.txt or the versions change).
add_test(NAME hf_gt_fixtures
         COMMAND ${FTX_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_hf_ground_truth.py
                 ${FTX_FIXTURES}/hf_ground_truth)
set_tests_properties(hf_gt_fixtures PROPERTIES FIXTURES_SETUP hf_gt_fx ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS "hf" TIMEOUT 600)

# NeMo p-tuning archives and their references (tests/reference/prompt_reference.py).
add_test(NAME prompt_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_prompt_fixtures.py ${FTX_FIXTURES}/prompt)
set_tests_properties(prompt_fixtures PROPERTIES FIXTURES_SETUP prompt_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

# 4-layer models for the pipeline grids (only where mpirun runs them).
if(FTX_MPIRUN)
  add_test(NAME pp_fixtures
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_pp_models.py ${FTX_FIXTURES}/pp)
  set_tests_properties(pp_fixtures PROPERTIES FIXTURES_SETUP pp_models ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
endif()

# `ftx smoothquant` folders of the engine models and the float64 emulation's W8A8 outputs.
add_test(NAME w8a8_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_w8a8_fixtures.py ${FTX_FIXTURES}/w8a8
                 $<TARGET_FILE:ftx> ${FTX_FIXTURES}/engine)
set_tests_properties(w8a8_fixtures PROPERTIES FIXTURES_SETUP w8a8_models FIXTURES_REQUIRED engine_models
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

# `ftx smoothquant --fp8` folders and the float64 FP8 emulation (test venv: ml_dtypes).
add_test(NAME fp8_fixtures
         COMMAND ${FTX_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_fp8_fixtures.py ${FTX_FIXTURES}/fp8
                 $<TARGET_FILE:ftx> ${FTX_FIXTURES}/engine)
set_tests_properties(fp8_fixtures PROPERTIES FIXTURES_SETUP fp8_models FIXTURES_REQUIRED engine_models
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)

# A small GPT-2 trained on the KJV Bible (scripts/make_trained_gpt2.py, ~4 minutes alone on 2
# cores the first time, 13 beside the rest of the suite, then cached by its STAMP in
# ~/.cache/ftx/trained-gpt2, which a clean clone's run copies from), converted and
# SmoothQuant-exported (alpha 0 and 0.5): the INT8 accuracy test's and the docs' examples' model.
# COST: started first, so that the rest of the suite runs beside it; TIMEOUT: 759 s in CI, and a
# busier machine has taken over 900.
add_test(NAME trained_gpt2_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_trained_fixtures.py
                 ${FTX_FIXTURES}/trained)
set_tests_properties(trained_gpt2_fixtures PROPERTIES FIXTURES_SETUP trained_gpt2 ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS accuracy TIMEOUT 2400 COST 10000)

# npy, safetensors and .nemo tar/tar.gz inputs of the format readers' unit tests
# (tests/e2e/formats/formats.cmake makes those tests require it).
add_test(NAME formats_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_format_fixtures.py
                 ${FTX_FIXTURES}/formats)
set_tests_properties(formats_fixtures PROPERTIES FIXTURES_SETUP ftx_formats_fixtures
                     ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
