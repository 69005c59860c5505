#ifndef CORDERLY_PRIMITIVES_H
#define CORDERLY_PRIMITIVES_H

// The primitives OrderlyCore builds on that Swift does not give it everywhere: ThreadSanitizer
// announcements, the plain lock behind `OrderlyLock` and the stripe table where
// `Synchronization.Mutex` cannot be used (Apple systems before macOS 15 / iOS 18, and Linux builds
// with ORDERLY_PORTABLE_LOCKS, which test that path), atomics on plain integers for the same
// systems, and a thread-local slot that says which queue's `execute` work the thread is running.

/// Tells ThreadSanitizer that a lock guarding `address` was taken. Does nothing unless this
/// file's translation unit is compiled with -fsanitize=thread.
void corderly_tsan_acquire(const void *address);

/// Tells ThreadSanitizer that a lock guarding `address` is about to be released.
void corderly_tsan_release(const void *address);

#if defined(__APPLE__)
#include <os/lock.h>
#include <stdbool.h>
#include <stdint.h>
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
#include <stdbool.h>
#include <stdint.h>
/// A default (non-recursive) pthread mutex elsewhere.
typedef pthread_mutex_t corderly_lock_t;

static inline void corderly_lock_init(corderly_lock_t *lock) { pthread_mutex_init(lock, 0); }
static inline void corderly_lock_destroy(corderly_lock_t *lock) { pthread_mutex_destroy(lock); }
static inline void corderly_lock_lock(corderly_lock_t *lock) { pthread_mutex_lock(lock); }
static inline void corderly_lock_unlock(corderly_lock_t *lock) { pthread_mutex_unlock(lock); }
#endif

// MARK: - Striped locks

/// How many locks the stripe table holds.
#define CORDERLY_STRIPE_COUNT 256

/// One lock of the stripe table, alone on its cache line (128 bytes: Apple silicon's line).
typedef struct {
  _Alignas(128) corderly_lock_t lock;
} corderly_stripe_t;

/// The stripe table: static storage, so every lock in it has one address for the life of the
/// process. Initialized before `main` (all zero on Apple systems, which is `OS_UNFAIR_LOCK_INIT`;
/// by `pthread_mutex_init` elsewhere).
extern corderly_stripe_t corderly_stripes[CORDERLY_STRIPE_COUNT];

/// The lock of the table that guards `object`'s state, chosen by its address.
///
/// Objects share a lock when their addresses hash alike, so code holding one must take no other
/// stripe lock (nor call code that might).
static inline corderly_lock_t *corderly_stripe_for(const void *object) {
  uint64_t address = (uint64_t)(uintptr_t)object;
  // Fibonacci hashing: the top 8 bits of the product spread nearby heap addresses apart.
  return &corderly_stripes[((address >> 4) * 0x9E3779B97F4A7C15ull) >> 56].lock;
}

// MARK: - Atomics

// Atomic operations on plain integers, for `OrderlyAtomic` where `Synchronization.Atomic`
// cannot be used. Compiler built-ins, so ThreadSanitizer sees them.
#define CORDERLY_ATOMIC(NAME, TYPE)                                                        \
  static inline TYPE corderly_##NAME##_load(TYPE *value, int order) {                      \
    return __atomic_load_n(value, order);                                                  \
  }                                                                                        \
  static inline void corderly_##NAME##_store(TYPE *value, TYPE desired, int order) {       \
    __atomic_store_n(value, desired, order);                                               \
  }                                                                                        \
  static inline TYPE corderly_##NAME##_exchange(TYPE *value, TYPE desired, int order) {    \
    return __atomic_exchange_n(value, desired, order);                                     \
  }
#define CORDERLY_ATOMIC_ARITHMETIC(NAME, TYPE)                                             \
  static inline TYPE corderly_##NAME##_fetch_add(TYPE *value, TYPE operand, int order) {   \
    return __atomic_fetch_add(value, operand, order);                                      \
  }                                                                                        \
  static inline TYPE corderly_##NAME##_fetch_sub(TYPE *value, TYPE operand, int order) {   \
    return __atomic_fetch_sub(value, operand, order);                                      \
  }

CORDERLY_ATOMIC(bool, bool)
CORDERLY_ATOMIC(uint8, uint8_t)
CORDERLY_ATOMIC(uint64, uint64_t)
CORDERLY_ATOMIC(intptr, intptr_t)
CORDERLY_ATOMIC_ARITHMETIC(uint8, uint8_t)
CORDERLY_ATOMIC_ARITHMETIC(uint64, uint64_t)
CORDERLY_ATOMIC_ARITHMETIC(intptr, intptr_t)

// MARK: - The thread's running lane

/// The queue (`JobQueueCore`) whose `execute` closures the current thread is running, or NULL.
///
/// Set by the runner around a run of such closures, which are synchronous: no other task runs on
/// the thread in between, so the slot names the queue for exactly that run.
extern _Thread_local const void *corderly_running_lane;

static inline const void *corderly_running_lane_get(void) { return corderly_running_lane; }
static inline void corderly_running_lane_set(const void *queue) { corderly_running_lane = queue; }

/// The memory orders, as `__atomic` built-ins take them.
static const int corderly_order_relaxed = __ATOMIC_RELAXED;
static const int corderly_order_acquire = __ATOMIC_ACQUIRE;
static const int corderly_order_release = __ATOMIC_RELEASE;
static const int corderly_order_acq_rel = __ATOMIC_ACQ_REL;
static const int corderly_order_seq_cst = __ATOMIC_SEQ_CST;

#endif
