#include "lib/engine/step_logits.h"

#include <algorithm>

#include "lib/engine/engine.h"
#include "lib/ops/backend.h"

namespace ftx {

StepLogits::StepLogits(Engine& engine)
    : engine_(engine),
      on_device_(engine.logits_on_this_rank()),
      vocab_(engine.vocab_size()),
      stride_(on_device_ ? engine.logits_stride() : engine.vocab_size()) {}

StepLogits::~StepLogits() {
  if (device_) engine_.backend().release(device_);
}

void StepLogits::resize(int64_t rows) {
  rows_ = rows;
  const size_t n = static_cast<size_t>(rows * stride_);
  if (!on_device_) {
    host_.assign(n, 0.0f);
    return;
  }
  ops::Backend& be = engine_.backend();
  if (device_) be.release(device_);
  device_ = nullptr;
  device_ = be.alloc(std::max<size_t>(n, 1));
  be.fill(device_, 0.0f, n);
}

void StepLogits::set_row(int64_t row, const float* host) {
  if (on_device_) {
    engine_.backend().upload(device_ + row * stride_, host, static_cast<size_t>(vocab_));
  } else {
    std::copy_n(host, vocab_, host_.begin() + row * vocab_);
  }
}

float* StepLogits::decode_target(int64_t n) {
  if (on_device_) return nullptr;
  decoded_.resize(static_cast<size_t>(n * vocab_));
  return decoded_.data();
}

void StepLogits::take_decode(const std::vector<int32_t>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t r = rows[i], at = static_cast<int64_t>(i);
    if (on_device_) {
      engine_.backend().copy(device_ + r * stride_, engine_.device_logits() + at * stride_, static_cast<size_t>(vocab_));
    } else {
      std::copy_n(decoded_.begin() + at * vocab_, vocab_, host_.begin() + r * vocab_);
    }
  }
}

const StepOutput& StepLogits::step(Decoder& decoder) {
  if (on_device_) return decoder.step(engine_.backend(), device_, stride_);
  return decoder.step(host_.data());
}

}  // namespace ftx
