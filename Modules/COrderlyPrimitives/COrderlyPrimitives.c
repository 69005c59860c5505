// ThreadSanitizer cannot see the lock inside Swift's Synchronization.Mutex on Linux (the
// standard library is not instrumented), so it reports races on state that the mutex does
// guard. Orderly's locks announce their acquire and release edges through these functions.
// SwiftPM compiles this file with -fsanitize=thread under `swift test --sanitize=thread`;
// in every other build they are empty.
#include "COrderlyPrimitives.h"

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

// The thread's running lane (see the header).
_Thread_local const void *corderly_running_lane = 0;

// The stripe table (see the header). Zero is an unlocked `os_unfair_lock`; a pthread mutex is
// initialized here before `main`, so no lock is ever used uninitialized.
corderly_stripe_t corderly_stripes[CORDERLY_STRIPE_COUNT];

#if !defined(__APPLE__)
__attribute__((constructor)) static void corderly_stripes_init(void) {
  for (int index = 0; index < CORDERLY_STRIPE_COUNT; index++) {
    pthread_mutex_init(&corderly_stripes[index].lock, 0);
  }
}
#endif
