# Torch checkpoint reader (formats/pickle.cc, formats/zip_directory.cc, formats/torch_checkpoint.cc).
#
# The unit tests tests/unit/{pickle,torch_checkpoint}_test.cc need no entry here: torch_checkpoint_test
# makes its fixtures itself on first use ($FTX_TORCH_PYTHON scripts/fixtures/make_torch_fixtures.py
# $FTX_FIXTURES/torch, under an flock so that the per-test processes ctest runs in parallel do not
# race), because gtest_discover_tests' tests cannot be given FIXTURES_REQUIRED from an area file.
#
# Fuzz builds (-DFTX_FUZZ=ON, clang) also replay the committed corpora, crash reproducers included,
# through both fuzz targets once.
if(FTX_FUZZ)
  foreach(target pickle_fuzz torch_zip_fuzz)
    add_test(NAME ${target}_corpus
             COMMAND ${target} -runs=0 ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${target})
    set_tests_properties(${target}_corpus PROPERTIES ENVIRONMENT "${FTX_TEST_ENV}")
  endforeach()
endif()
