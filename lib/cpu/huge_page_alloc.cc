#include "lib/cpu/huge_page_alloc.h"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ftx::cpu {

void* alloc_on_huge_pages(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0 || posix_memalign(&p, kHugePageBytes, bytes) != 0) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: where THP is off ("never") or the kernel lacks it, this fails and the buffer
  // stays on small pages, which is still correct.
  const size_t whole = bytes / kHugePageBytes * kHugePageBytes;
  if (whole > 0) (void)madvise(p, whole, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace ftx::cpu
