# gemm-tune: the GPU end-to-end run (label gpu). It reuses the gemm_tune_gpu_test executable (built
# from tests/unit/gemm_tune_gpu_test.cc) and enables its GPU case with FTX_GEMM_GPU_TEST=1; on a
# machine without a CUDA device the case calls GTEST_SKIP and ctest reports the test as skipped.
add_test(NAME gemm_tune_gpu
         COMMAND gemm_tune_gpu_test --gtest_filter=GemmTuneGpu.*)
set_tests_properties(gemm_tune_gpu PROPERTIES
                     ENVIRONMENT "${FTX_TEST_ENV};FTX_GEMM_GPU_TEST=1"
                     LABELS gpu
                     SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
                     TIMEOUT 1200)
