#ifndef CMALLOCINFO_H
#define CMALLOCINFO_H
#include <stddef.h>

/// Bytes currently allocated by malloc in this process (glibc's mallinfo2), or 0 where unknown.
size_t cmallocinfo_allocated_bytes(void);

#endif
