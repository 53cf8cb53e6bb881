#include "lib/cpu/cpu_features.h"

namespace ftx::cpu {

#if defined(__x86_64__)
bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
bool has_avx512_core() {
  static const bool yes = has_avx512f() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return yes;
}
bool has_avx512_vnni() {
  static const bool yes = has_avx512_core() && __builtin_cpu_supports("avx512vnni");
  return yes;
}
bool has_avx512_bf16() {
  static const bool yes = has_avx512_core() && __builtin_cpu_supports("avx512bf16");
  return yes;
}
bool has_amx_bf16() {
  static const bool yes = __builtin_cpu_supports("amx-bf16");
  return yes;
}
#else
bool has_avx512f() { return false; }
bool has_avx512_core() { return false; }
bool has_avx512_vnni() { return false; }
bool has_avx512_bf16() { return false; }
bool has_amx_bf16() { return false; }
#endif

}  // namespace ftx::cpu
