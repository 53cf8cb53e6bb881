# gemm-tune. The GEMM list, the file format and the runtime lookup are unit tests
# (tests/unit/gemm_*_test.cc); the GPU run is tests/unit/gemm_tune_gpu_test.cc (label gpu, skipped
# without a device). Here: `-m MODEL_DIR` reads the model's config.ini. The sizes are validated
# before a GPU is looked for, so this runs on every machine: head_num 12 with --tensor-para-size 5
# must be refused by name.
add_test(NAME gemm_tune_model_dir
         COMMAND sh -c "d=$(mktemp -d) && mkdir -p \"$d/1-gpu\" && printf '%s\\n' '[gpt]' 'model_name = gpt' \
'head_num = 12' 'size_per_head = 64' 'inter_size = 3072' 'num_layer = 2' 'max_pos_seq_len = 1024' \
'vocab_size = 50257' 'start_id = 50256' 'end_id = 50256' 'weight_data_type = fp32' 'tensor_para_size = 1' \
> \"$d/1-gpu/config.ini\" && \"$FTX_BIN\" gemm-tune -m \"$d/1-gpu\" --tensor-para-size 5 --batch-size 1 \
--beam-width 1 --max-input-len 8 --data-type fp16 -o \"$d/gemm_config.in\" 2>&1; rc=$?; rm -rf \"$d\"; \
[ $rc -eq 1 ] || echo \"gemm_tune_model_dir: exit code $rc, expected 1\"")
set_tests_properties(gemm_tune_model_dir PROPERTIES
                     ENVIRONMENT "${FTX_TEST_ENV}"
                     LABELS unit
                     PASS_REGULAR_EXPRESSION "ftx: error: head_num 12 is not divisible by tensor_para_size 5"
                     FAIL_REGULAR_EXPRESSION "expected 1")
