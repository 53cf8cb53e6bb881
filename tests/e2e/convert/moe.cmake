# `ftx convert-megatron` on Megatron-DeepSpeed MoE GPT checkpoints (issue 51; moe_test.py): FT's
# GPT-MoE layout byte-equal to scripts/reference/ft_moe_converter_ref.py (FT's
# megatron_gpt_moe_ckpt_convert.py transcribed), the folder accepted by inspect and refused by
# generate by name, and the checkpoints FT's script cannot read refused by name.
add_test(NAME moe_fixtures
         COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/fixtures/make_moe_fixtures.py ${FTX_FIXTURES}/moe)
set_tests_properties(moe_fixtures PROPERTIES FIXTURES_SETUP moe_fx ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 300)
foreach(part compat folder errors)
  add_test(NAME convert_moe_${part} COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/moe_test.py ${part})
  set_tests_properties(convert_moe_${part} PROPERTIES FIXTURES_REQUIRED moe_fx ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 600 LABELS e2e)
endforeach()
