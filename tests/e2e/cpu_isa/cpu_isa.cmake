# The CPU kernels at every instruction-set level this machine has below its own (issue 40): the
# kernel and engine tests again with FTX_CPU_ISA capping ftx's kernels and oneDNN, and
# OPENBLAS_CORETYPE capping OpenBLAS (which picks its kernels when it loads). An AVX-512 machine
# runs them at avx2 and baseline, an AVX2 machine at baseline; the default run is the machine's own
# level. Labels cpu-isa-avx2 and cpu-isa-baseline. Each capped run checks that the level it asked
# for is the level that ran, in ftx's kernels, oneDNN and OpenBLAS (FTX_TEST_ISA;
# tests/unit/cpu_isa_reached.cc). And the same binaries on emulated CPUs, qemu-user's, where their
# CPUID, not a cap, decides: one with AVX2 but no AVX-512 at all (cpu_isa_emulated_avx2, as a
# user's AMD Zen 3) and one without AVX (cpu_isa_emulated_baseline, a Nehalem).
file(READ /proc/cpuinfo FTX_CPUINFO LIMIT 65536)
set(FTX_ISA_LEVELS_BELOW "")
if(FTX_CPUINFO MATCHES " avx512f " AND FTX_CPUINFO MATCHES " avx512bw " AND FTX_CPUINFO MATCHES " avx512vl "
   AND FTX_CPUINFO MATCHES " avx512dq ")
  list(APPEND FTX_ISA_LEVELS_BELOW avx2 baseline)
elseif(FTX_CPUINFO MATCHES " avx2 " AND FTX_CPUINFO MATCHES " fma " AND FTX_CPUINFO MATCHES " f16c ")
  list(APPEND FTX_ISA_LEVELS_BELOW baseline)
endif()

# The gtest binaries whose every test runs a CPU kernel or the engine on the CPU backend (of
# backend_ops_test its CPU instances and coverage check; its CUDA ones are the gpu label's); each
# checks after its tests the level its kernels ran at (cpu_isa_reached.cc).
set(FTX_ISA_UNIT_TESTS backend_ops_test cpu_half_gemm_test cpu_fp8_gemm_test cpu_int4_gemm_test cpu_activation_test cpu_rms_norm_test
    half_rounding_test w8a8_gemm_test kv_cache_int8_test engine_ops_test engine_reference_test engine_half_test
    engine_paged_test engine_w8a8_test engine_fp8_test engine_session_test)
add_library(cpu_isa_reached OBJECT ${CMAKE_CURRENT_LIST_DIR}/../../unit/cpu_isa_reached.cc)
target_link_libraries(cpu_isa_reached PRIVATE ftx_runtime GTest::gtest)
foreach(t ${FTX_ISA_UNIT_TESTS})
  target_link_libraries(${t} PRIVATE cpu_isa_reached)
endforeach()

foreach(level ${FTX_ISA_LEVELS_BELOW})
  if(level STREQUAL avx2)
    set(openblas_core Haswell)
  else()
    set(openblas_core Prescott)
  endif()
  set(env ${FTX_TEST_ENV} FTX_CPU_ISA=${level} OPENBLAS_CORETYPE=${openblas_core} FTX_TEST_ISA=${level})
  foreach(t ${FTX_ISA_UNIT_TESTS})
    set(filter "")
    set(fixtures engine_models)
    if(t STREQUAL backend_ops_test)  # makes its own inputs
      set(filter "--gtest_filter=-*/cuda")
      set(fixtures "")
    elseif(t STREQUAL engine_fp8_test OR t STREQUAL engine_w8a8_test)
      # Each case checks against a float64 emulation in Python (about 4 s each, 50 cases): at the
      # lower levels only GPT-2 (learned positions, GELU, LayerNorm) and Llama (rope, SwiGLU, RMSNorm,
      # grouped-query attention), which between them run every kernel a level switches; the other
      # families differ in layout, which the default run covers.
      set(filter "--gtest_filter=*Weights.*:*/gpt2_*:*/llama_*")
    endif()
    add_test(NAME cpu_isa_${level}.${t} COMMAND $<TARGET_FILE:${t}> ${filter})
    set_tests_properties(cpu_isa_${level}.${t} PROPERTIES ENVIRONMENT "${env}" LABELS cpu-isa-${level}
                         FIXTURES_REQUIRED "${fixtures}" TIMEOUT 900)
  endforeach()
  # The binary the CLI runs says it runs capped.
  add_test(NAME cpu_isa_${level}.version COMMAND $<TARGET_FILE:ftx> --version)
  set_tests_properties(cpu_isa_${level}.version PROPERTIES ENVIRONMENT "${env}" LABELS cpu-isa-${level}
                       PASS_REGULAR_EXPRESSION "cpu kernels: ${level} [(]capped by FTX_CPU_ISA=${level}, the CPU has")
  # `ftx generate` end to end (greedy, --dtype bf16/fp16 against the float64 emulation, beams,
  # streams, text) and fp16/bf16 at TP 2 under mpirun.
  add_test(NAME cpu_isa_${level}.engine_generate_cli
           COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../generate/engine_generate_test.py cli)
  set_tests_properties(cpu_isa_${level}.engine_generate_cli PROPERTIES ENVIRONMENT "${env}"
                       LABELS cpu-isa-${level} FIXTURES_REQUIRED engine_models TIMEOUT 600)
  if(FTX_MPIRUN)
    add_test(NAME cpu_isa_${level}.engine_half_tp_mpi
             COMMAND ${FTX_MPIRUN} -np 2 --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1
                     -x FTX_CPU_ISA -x OPENBLAS_CORETYPE -x FTX_TEST_ISA
                     $<TARGET_FILE:engine_half_test> --gtest_filter=HalfWeightsTensorParallel.*)
    set_tests_properties(cpu_isa_${level}.engine_half_tp_mpi PROPERTIES ENVIRONMENT "${env}"
                         LABELS cpu-isa-${level} FIXTURES_REQUIRED engine_models TIMEOUT 300)
  endif()
endforeach()

# Registered wherever the binaries are x86-64, qemu or not: without qemu-user (scripts/setup
# installs it) they exit 77, a skip that scripts/test counts as a failure.
find_program(FTX_QEMU_X86_64 qemu-x86_64)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64")
  foreach(level avx2 baseline)
    add_test(NAME cpu_isa_emulated_${level}
             COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/cpu_isa_emulated_test.py ${level} "${FTX_QEMU_X86_64}"
                     cpu_half_gemm_test=$<TARGET_FILE:cpu_half_gemm_test> kv_cache_int8_test=$<TARGET_FILE:kv_cache_int8_test>
                     w8a8_gemm_test=$<TARGET_FILE:w8a8_gemm_test> cpu_activation_test=$<TARGET_FILE:cpu_activation_test>
                     cpu_rms_norm_test=$<TARGET_FILE:cpu_rms_norm_test> half_rounding_test=$<TARGET_FILE:half_rounding_test>
                     cpu_fp8_gemm_test=$<TARGET_FILE:cpu_fp8_gemm_test> engine_ops_test=$<TARGET_FILE:engine_ops_test>
                     backend_ops_test=$<TARGET_FILE:backend_ops_test>)
    set_tests_properties(cpu_isa_emulated_${level} PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}" LABELS cpu-isa-${level}
                         FIXTURES_REQUIRED engine_models TIMEOUT 1200 SKIP_RETURN_CODE 77)
  endforeach()
endif()
