#include "lib/engine/kv_cache_scales.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "formats/error.h"

namespace ftx {

std::string kv_cache_scale_file(int64_t layer) {
  return "model.layers." + std::to_string(layer) + ".attention.query_key_value.scale_y_quant_orig.bin";
}

float read_kv_cache_scale(const std::string& dir, int64_t layer) {
  return read_scale_file(dir + "/" + kv_cache_scale_file(layer),
                         "--int8-kv-cache needs the layers' KV-cache scales; write them with "
                         "`ftx smoothquant --calibrate-kv-cache`");
}

float read_scale_file(const std::string& path, const std::string& missing) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) throw Error(path, "missing: " + missing);
  if (st.st_size != static_cast<off_t>(sizeof(float)))
    throw Error(path, std::to_string(st.st_size) + " bytes, expected 4 (one fp32 scale)");
  std::ifstream in(path, std::ios::binary);
  char bytes[sizeof(float)];
  if (!in.read(bytes, sizeof bytes)) throw Error(path, "cannot be read");
  float scale;
  std::memcpy(&scale, bytes, sizeof scale);
  if (!(scale > 0.0f) || !std::isfinite(scale))
    throw Error(path, "scale " + std::to_string(scale) + " is not a finite positive number");
  return scale;
}

}  // namespace ftx
