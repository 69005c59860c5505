// ThreadSanitizer cannot see the lock inside Swift's Synchronization.Mutex on Linux (the
// standard library is not instrumented), so it reports races on state that the mutex does
// guard. Orderly's locks announce their acquire and release edges through these functions.
// SwiftPM compiles this file with -fsanitize=thread under `swift test --sanitize=thread`;
// in every other build they are empty.
#include "COrderlySanitizer.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CORDERLY_TSAN 1
#endif
#endif

#ifdef CORDERLY_TSAN
void __tsan_acquire(void *address);
void __tsan_release(void *address);

void corderly_tsan_acquire(const void *address) { __tsan_acquire((void *)address); }
void corderly_tsan_release(const void *address) { __tsan_release((void *)address); }
#else
void corderly_tsan_acquire(const void *address) { (void)address; }
void corderly_tsan_release(const void *address) { (void)address; }
#endif
