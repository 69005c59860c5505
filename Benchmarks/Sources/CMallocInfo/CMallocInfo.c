#include "CMallocInfo.h"
#include <stdlib.h> /* defines __GLIBC__ on glibc systems */

#if defined(__GLIBC__)
#include <malloc.h>
size_t cmallocinfo_allocated_bytes(void) { return mallinfo2().uordblks; }
#elif defined(__APPLE__)
#include <malloc/malloc.h>
size_t cmallocinfo_allocated_bytes(void) {
  malloc_statistics_t statistics;
  malloc_zone_statistics(NULL, &statistics);
  return statistics.size_in_use;
}
#else
size_t cmallocinfo_allocated_bytes(void) { return 0; }
#endif
