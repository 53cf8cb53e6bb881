#pragma once
// What the CPU this process runs on can execute, asked once: the hand-written kernels are compiled
// for AVX-512 with target attributes and pick their path at run time, so one binary serves every
// x86-64 machine. All false off x86-64.
namespace ftx::cpu {

bool has_avx512f();      // AVX-512 Foundation (512-bit float ops)
bool has_avx512_core();  // F + BW + VL: the byte/word and 256-bit masked forms the kernels also use
bool has_avx512_vnni();  // core + VNNI (vpdpbusd)
bool has_avx512_bf16();  // core + BF16 (vdpbf16ps)
bool has_amx_bf16();     // AMX tiles with bf16 (oneDNN uses them; ftx's kernels do not)

}  // namespace ftx::cpu
