# `ftx convert-mesh-jax` (issue 49; mesh_jax_test.py): the committed mesh-transformer-jax slim fixture
# of tests/fixtures/mesh_jax/ against FasterTransformer's own gptj_ckpt_convert.py output there (run
# with jax from PyPI, scripts/requirements/jax.txt), greedy tokens against transformers' float64
# GPT-J, where FT's converter and to_hf_weights.py differ, bad inputs. Test venv: transformers 4.45.2.
foreach(part compat decode differ errors)
  add_test(NAME convert_mesh_jax_${part}
           COMMAND ${FTX_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/mesh_jax_test.py ${part})
  set_tests_properties(convert_mesh_jax_${part} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" TIMEOUT 600 LABELS e2e)
endforeach()
