# `ftx convert-megatron` on Megatron-DeepSpeed MoE GPT checkpoints (issue 51; moe_test.py): FT's
# GPT-MoE layout byte-equal to scripts/reference/ft_moe_converter_ref.py (FT's
# megatron_gpt_moe_ckpt_convert.py transcribed), the folder accepted by inspect and its logits
# against a float64 forward of the DeepSpeed checkpoint at TP 1 and 2, DeepSpeed's `latest` file,
# and the checkpoints FT's script cannot read refused by name.
add_test(NAME moe_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_moe_fixtures.py ${FTX_FIXTURES}/moe)
set_tests_properties(moe_fixtures PROPERTIES FIXTURES_SETUP moe_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
foreach(part compat folder latest errors)
  add_test(NAME convert_moe_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/moe_test.py ${part})
  set_tests_properties(convert_moe_${part} PROPERTIES FIXTURES_REQUIRED moe_fx TIMEOUT 600 LABELS e2e
                       ENVIRONMENT "${FTX_TEST_ENV};FTX_ARCH_ENGINE_TEST=$<TARGET_FILE:convert_arch_test>")
endforeach()
