# The GPU plan without a GPU (issue 36): the device-tool calls of scripts/gpu-calls run
# scripts/gpu-run over stub test binaries, one of which hangs, with a fake $OUT: the deadline, the
# per-binary limit, the TERM trap, the failure lines on stdout and the tarballs
# (gpu_run_test.py). Plain Python, no build products.
add_test(NAME gpu_run_plan COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/gpu_run_test.py ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_run_plan PROPERTIES LABELS e2e TIMEOUT 300)
