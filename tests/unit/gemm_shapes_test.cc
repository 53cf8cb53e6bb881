// The GEMM list must equal FT's gpt_gemm list (docs/runtime.md#gemm-tunes-gemms) to the integer: every
// expected number below is written out by hand from that table, not computed by the code under test.
#include <gtest/gtest.h>

#include "formats/error.h"
#include "lib/gemm/gemm_shapes.h"

using namespace ftx::gemm;

namespace {

struct Expect { int64_t m, n, k, batch_count; };

void expect_shapes(const std::vector<GemmShape>& got, size_t offset, int64_t batch_beam, int64_t seq,
                   const Expect (&want)[11]) {
  for (int i = 0; i < 11; ++i) {
    SCOPED_TRACE("GEMM " + std::to_string(i) + " of batch_beam " + std::to_string(batch_beam));
    const GemmShape& s = got.at(offset + i);
    EXPECT_EQ(s.id, i);
    EXPECT_EQ(s.batch_beam, batch_beam);
    EXPECT_EQ(s.seq_len, i <= 5 ? seq : 1);
    EXPECT_EQ(s.m, want[i].m);
    EXPECT_EQ(s.n, want[i].n);
    EXPECT_EQ(s.k, want[i].k);
    EXPECT_EQ(s.batch_count, want[i].batch_count);
  }
}

GemmModelDims dims(int64_t heads, int64_t dh, int64_t inter, int64_t vocab, int64_t tp) {
  GemmModelDims d;
  d.head_num = heads;
  d.size_per_head = dh;
  d.inter_size = inter;
  d.vocab_size = vocab;
  d.tensor_para_size = tp;
  return d;
}

}  // namespace

// The example of FT's GPT guide: gpt_gemm 8 1 32 12 128 6144 51200 1 1 (B=8, beam 1, S=32, 12 heads of
// 128, inter 6144, vocab 51200, fp16, tp 1). H = 1536, Sp = 32.
TEST(GemmShapes, FtDocExampleEveryBatchSize) {
  GemmWorkload w;
  w.batch_size = 8;
  w.beam_width = 1;
  w.max_input_len = 32;
  auto got = gpt_gemm_shapes_all_batches(dims(12, 128, 6144, 51200, 1), w);
  ASSERT_EQ(got.size(), 88u);
  // batch 1
  const Expect b1[11] = {{32, 4608, 1536, 1}, {32, 32, 128, 12}, {32, 128, 32, 12}, {32, 1536, 1536, 1},
                         {32, 6144, 1536, 1}, {32, 1536, 6144, 1}, {1, 4608, 1536, 1}, {1, 1536, 1536, 1},
                         {1, 6144, 1536, 1},  {1, 1536, 6144, 1}, {1, 51200, 1536, 1}};
  expect_shapes(got, 0, 1, 32, b1);
  // batch 3
  const Expect b3[11] = {{96, 4608, 1536, 1}, {32, 32, 128, 36}, {32, 128, 32, 36}, {96, 1536, 1536, 1},
                         {96, 6144, 1536, 1}, {96, 1536, 6144, 1}, {3, 4608, 1536, 1}, {3, 1536, 1536, 1},
                         {3, 6144, 1536, 1},  {3, 1536, 6144, 1}, {3, 51200, 1536, 1}};
  expect_shapes(got, 22, 3, 32, b3);
  // batch 8 (what FT's gpt_gemm itself writes for this command line)
  const Expect b8[11] = {{256, 4608, 1536, 1}, {32, 32, 128, 96}, {32, 128, 32, 96}, {256, 1536, 1536, 1},
                         {256, 6144, 1536, 1}, {256, 1536, 6144, 1}, {8, 4608, 1536, 1}, {8, 1536, 1536, 1},
                         {8, 6144, 1536, 1},   {8, 1536, 6144, 1}, {8, 51200, 1536, 1}};
  expect_shapes(got, 77, 8, 32, b8);
  EXPECT_STREQ(got[0].label, "context from_tensor * weightQKV");
  EXPECT_STREQ(got[1].label, "context batch gemm Q*K^T");
  EXPECT_STREQ(got[2].label, "context batch gemm QK*V^T");
  EXPECT_STREQ(got[6].label, "from_tensor * weightQKV");
  EXPECT_STREQ(got[10].label, "logits gemm");
}

// FT gpt_gemm.cc usage example: 8 4 32 96 128 49152 51200 1 8 (beam 4, tp 8). H = 12288, Hl = 1536,
// I/tp = 6144, local heads 12, logits N = 51200/8 = 6400; batch·beam = 32 for B = 8.
TEST(GemmShapes, FtSourceExampleTensorParallel8Beam4) {
  auto got = gpt_gemm_shapes(dims(96, 128, 49152, 51200, 8), 32, 32);
  const Expect want[11] = {{1024, 4608, 12288, 1}, {32, 32, 128, 384},   {32, 128, 32, 384},
                           {1024, 12288, 1536, 1}, {1024, 6144, 12288, 1}, {1024, 12288, 6144, 1},
                           {32, 4608, 12288, 1},   {32, 12288, 1536, 1},   {32, 6144, 12288, 1},
                           {32, 12288, 6144, 1},   {32, 6400, 12288, 1}};
  expect_shapes(got, 0, 32, 32, want);

  GemmWorkload w;
  w.batch_size = 2;
  w.beam_width = 4;
  w.max_input_len = 32;
  auto all = gpt_gemm_shapes_all_batches(dims(96, 128, 49152, 51200, 8), w);
  ASSERT_EQ(all.size(), 22u);
  EXPECT_EQ(all[0].batch_beam, 4);   // batch 1 · beam 4
  EXPECT_EQ(all[11].batch_beam, 8);  // batch 2 · beam 4
  EXPECT_EQ(all[12].batch_count, 8 * 12);
}

// S = 20 is not a multiple of 16: GEMMs 1 and 2 are recorded with Sp = 32 but timed with S = 20.
// Vocab 50257 with tp 3: ceil(50257/8)*8 = 50264, /3 truncates to 16754 (FT's int assignment).
TEST(GemmShapes, PaddedSequenceAndTruncatedLogits) {
  auto got = gpt_gemm_shapes(dims(12, 64, 3072, 50257, 3), 2, 20);
  // H = 768, Hl = 256, I/tp = 1024, local heads 4.
  const Expect want[11] = {{40, 768, 768, 1},  {32, 32, 64, 8},    {32, 64, 32, 8},  {40, 768, 256, 1},
                           {40, 1024, 768, 1}, {40, 768, 1024, 1}, {2, 768, 768, 1}, {2, 768, 256, 1},
                           {2, 1024, 768, 1},  {2, 768, 1024, 1},  {2, 16754, 768, 1}};
  expect_shapes(got, 0, 2, 20, want);
  // Timed with the unpadded S.
  EXPECT_EQ(got[1].timed_m, 20);
  EXPECT_EQ(got[1].timed_n, 20);
  EXPECT_EQ(got[1].timed_k, 64);
  EXPECT_EQ(got[2].timed_m, 20);
  EXPECT_EQ(got[2].timed_n, 64);
  EXPECT_EQ(got[2].timed_k, 20);
  for (int i : {0, 3, 4, 5, 6, 7, 8, 9, 10}) {
    EXPECT_EQ(got[i].timed_m, got[i].m);
    EXPECT_EQ(got[i].timed_n, got[i].n);
    EXPECT_EQ(got[i].timed_k, got[i].k);
  }
  for (int i = 0; i < 11; ++i) {
    EXPECT_EQ(got[i].strided_batched, i == 1 || i == 2);
    EXPECT_EQ(got[i].transpose_weight, i == 10);
    EXPECT_EQ(got[i].fp32_output, i == 1);
  }
}

// A model width apart from heads × head_dim (Qwen3, Gemma): hidden 24, 4 heads × 8 (Q 32 wide), tp 2.
// QKV reads H = 24 and writes 3·Q/tp = 48; the attention output reads Q/tp = 16 and writes 24; the
// FFN and logits read and write H.
TEST(GemmShapes, HiddenApartFromHeadsTimesHeadDim) {
  GemmModelDims d = dims(4, 8, 64, 300, 2);
  d.hidden_size = 24;
  auto got = gpt_gemm_shapes(d, 1, 16);
  const Expect want[11] = {{16, 48, 24, 1}, {16, 16, 8, 2}, {16, 8, 16, 2}, {16, 24, 16, 1}, {16, 32, 24, 1},
                           {16, 24, 32, 1}, {1, 48, 24, 1}, {1, 24, 16, 1}, {1, 32, 24, 1}, {1, 24, 32, 1},
                           {1, 152, 24, 1}};
  expect_shapes(got, 0, 1, 16, want);
}

TEST(GemmShapes, RejectsBadSizes) {
  EXPECT_THROW(gpt_gemm_shapes(dims(12, 64, 3072, 50257, 5), 1, 8), ftx::Error);  // 12 % 5
  EXPECT_THROW(gpt_gemm_shapes(dims(12, 64, 3070, 50257, 4), 1, 8), ftx::Error);  // 3070 % 4
  EXPECT_THROW(gpt_gemm_shapes(dims(0, 64, 3072, 50257, 1), 1, 8), ftx::Error);
  EXPECT_THROW(gpt_gemm_shapes(dims(12, 64, 3072, 50257, 1), 0, 8), ftx::Error);
  EXPECT_THROW(gpt_gemm_shapes(dims(12, 64, 3072, 50257, 1), 1, 0), ftx::Error);
  // B·S·... beyond gemm_config.in's int fields.
  EXPECT_THROW(gpt_gemm_shapes(dims(64, 128, 32768, 50257, 1), 1 << 20, 4096), ftx::Error);
  try {
    gpt_gemm_shapes(dims(12, 64, 3072, 50257, 5), 1, 8);
  } catch (const ftx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_num 12"), std::string::npos) << e.what();
  }
}

TEST(GemmShapes, DataTypeNames) {
  EXPECT_EQ(gemm_dtype_from_name("fp32"), GemmDType::kFp32);
  EXPECT_EQ(gemm_dtype_from_name("FP16"), GemmDType::kFp16);
  EXPECT_EQ(gemm_dtype_from_name("bfloat16"), GemmDType::kBf16);
  EXPECT_EQ(static_cast<int>(GemmDType::kBf16), 2);  // FT's CublasDataType
  EXPECT_THROW(gemm_dtype_from_name("int4"), ftx::Error);
  EXPECT_STREQ(gemm_dtype_name(GemmDType::kFp16), "fp16");
}

TEST(GemmShapes, DimsFromModelConfig) {
  ftx::ModelConfig c;
  c.head_num = 16;
  c.size_per_head = 64;
  c.inter_size = 4096;
  c.vocab_size = 50304;
  auto d = gemm_dims_from_model(c, 2);
  EXPECT_EQ(d.head_num, 16);
  EXPECT_EQ(d.size_per_head, 64);
  EXPECT_EQ(d.inter_size, 4096);
  EXPECT_EQ(d.vocab_size, 50304);
  EXPECT_EQ(d.tensor_para_size, 2);
}
