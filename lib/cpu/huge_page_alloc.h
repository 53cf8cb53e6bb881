#pragma once
// Large host buffers (weights, KV cache) on transparent huge pages where the kernel offers them.
//
// A decode step streams every weight once. On 4 KB pages a 1.4 GB fp32 model is 350,000 pages,
// far more than the TLB holds, and each new page costs a page walk (a nested one in a virtual
// machine): one-row fp32 GEMMs over 403 MB of medium-sized layers took 16.5–19.9 ms on 4 KB pages
// and 12.0–12.4 ms on 2 MB pages (bench/results/decode-gemm-2026-11-25.txt). Linux with THP set
// to "madvise", as on the development VM, gives huge pages only to ranges that ask for them.
#include <cstddef>

namespace ftx::cpu {

constexpr size_t kHugePageBytes = size_t(2) << 20;

// `bytes` (> 0) starting on a 2 MB boundary, the whole 2 MB pages inside it advised as huge
// (MADV_HUGEPAGE; the tail past the last whole one stays on small pages, so no more memory is
// touched than asked for). Release with std::free. Throws std::bad_alloc.
void* alloc_on_huge_pages(size_t bytes);

}  // namespace ftx::cpu
