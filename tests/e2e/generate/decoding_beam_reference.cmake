# Decoding: the beam-search comparison with the PyTorch reference (tests/reference/
# beam_search_reference.py) is a unit test that runs the reference itself. It reads FTX_SOURCE_DIR /
# FTX_TORCH_PYTHON from the environment and falls back to these build-time paths, because
# gtest_discover_tests passes only the first entry of a list-valued ENVIRONMENT property.
if(TARGET decoding_beam_reference_test)
  target_compile_definitions(decoding_beam_reference_test PRIVATE
    FTX_DECODING_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    FTX_DECODING_TORCH_PYTHON="${FTX_TORCH_PYTHON}")
endif()
