# scripts/slurm/ftx-generate.sbatch on a private single-node Slurm (munged, slurmctld, slurmd started
# and stopped by the test): TP 2 and PP 2 under `sbatch --wait` equal one process. Skips (77) only
# where the daemons cannot run. Needs the pipeline fixtures (pp_models).
if(FTX_HAVE_MPI)
  add_test(NAME slurm_sbatch_generate COMMAND ${FTX_TORCH_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/slurm_test.py)
  set_tests_properties(slurm_sbatch_generate PROPERTIES FIXTURES_REQUIRED pp_models ENVIRONMENT "${FTX_TEST_ENV}"
                       TIMEOUT 2400 LABELS slurm SKIP_RETURN_CODE 77 RUN_SERIAL ON)
endif()
