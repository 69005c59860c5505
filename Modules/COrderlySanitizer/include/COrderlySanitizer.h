#ifndef CORDERLY_SANITIZER_H
#define CORDERLY_SANITIZER_H

// Small C helpers for OrderlyCore: ThreadSanitizer announcements, and the plain lock behind
// `OrderlyLock` where `Synchronization.Mutex` cannot be used (Apple systems before macOS 15 /
// iOS 18, and Linux builds with ORDERLY_PORTABLE_LOCKS, which test that path).

/// Tells ThreadSanitizer that a lock guarding `address` was taken. Does nothing unless this
/// file's translation unit is compiled with -fsanitize=thread.
void corderly_tsan_acquire(const void *address);

/// Tells ThreadSanitizer that a lock guarding `address` is about to be released.
void corderly_tsan_release(const void *address);

#if defined(__APPLE__)
#include <os/lock.h>
/// An `os_unfair_lock` on Apple systems (macOS 10.12, iOS 10 and later).
typedef os_unfair_lock corderly_lock_t;

static inline void corderly_lock_init(corderly_lock_t *lock) {
  *lock = OS_UNFAIR_LOCK_INIT;
}
static inline void corderly_lock_destroy(corderly_lock_t *lock) { (void)lock; }
static inline void corderly_lock_lock(corderly_lock_t *lock) { os_unfair_lock_lock(lock); }
static inline void corderly_lock_unlock(corderly_lock_t *lock) { os_unfair_lock_unlock(lock); }
#else
#include <pthread.h>
/// A default (non-recursive) pthread mutex elsewhere.
typedef pthread_mutex_t corderly_lock_t;

static inline void corderly_lock_init(corderly_lock_t *lock) { pthread_mutex_init(lock, 0); }
static inline void corderly_lock_destroy(corderly_lock_t *lock) { pthread_mutex_destroy(lock); }
static inline void corderly_lock_lock(corderly_lock_t *lock) { pthread_mutex_lock(lock); }
static inline void corderly_lock_unlock(corderly_lock_t *lock) { pthread_mutex_unlock(lock); }
#endif

#endif
