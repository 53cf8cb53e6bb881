# The layering rule (formats/ <- lib/ <- kernels/, cmd/): no include from a lower layer into a higher
# one, no FTX_HAVE_CUDA/NCCL branches in lib/, no integer mirror of a lib/ enum in kernels/
# (layering_test.py).
add_test(NAME layering_sources COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/layering_test.py ${CMAKE_SOURCE_DIR})
add_test(NAME layering_checker COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/layering_test.py --self-test)
# Citations: every *.md a source names is in the repository, and no source cites a document outside
# it or a bare section (layering_test.py --citations).
add_test(NAME layering_citations COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/layering_test.py --citations ${CMAKE_SOURCE_DIR})
add_test(NAME layering_citations_checker COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/layering_test.py --citations-self-test)
set_tests_properties(layering_sources layering_checker layering_citations layering_citations_checker PROPERTIES
                     LABELS layering TIMEOUT 60)
