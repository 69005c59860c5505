// The locks and atomics every Orderly module uses, on every platform Orderly claims.
//
// `Mutex` and `Atomic` (the Synchronization module) need macOS 15, iOS 18, tvOS 18, watchOS 11
// and visionOS 2. On Linux they have no such floor, and they stay: the engine's per-job locks
// live inline in the job, with no allocation. On Apple platforms, where the package reaches
// back to macOS 13 and iOS 16, `OrderlyMutex` and `OrderlyAtomic` are a `pthread_mutex_t` and
// the value in one heap block of their own. Building with `-Xswiftc -DORDERLY_PORTABLE_SYNC`
// selects the portable kind on Linux too, so CI compiles and tests the code Apple platforms run.
//
// Both kinds offer the same members, spelled as Synchronization spells them (`withLock`,
// `load(ordering:)`, `store(_:ordering:)`, `add`, `subtract`, `exchange`), so every use site
// compiles against either.

#if canImport(Darwin) || ORDERLY_PORTABLE_SYNC
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a lock: what `Mutex` is where the Synchronization module is available.
///
/// A `pthread_mutex_t` and the value share one heap block, owned by this noncopyable struct (as
/// `Mutex` owns its storage inline) and freed with it.
///
/// `@unchecked Sendable`, proved here: the block's value is read and written only between
/// `pthread_mutex_lock` and `pthread_mutex_unlock` of the block's own mutex (``withLock(_:)``,
/// ``withLockIfAvailable(_:)``); it enters as `sending` and leaves only as `sending` results, as
/// with `Mutex`; the mutex is initialised before the struct exists and destroyed in `deinit`,
/// when nothing can borrow it any more.
package struct OrderlyMutex<Value>: ~Copyable, @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private let value: UnsafeMutablePointer<Value>

  /// A lock guarding `value`.
  ///
  /// - Parameter initial: The initial value.
  package init(_ initial: consuming sending Value) {
    // One block: the mutex first, then the value at its alignment.
    let valueOffset =
      (MemoryLayout<pthread_mutex_t>.stride + MemoryLayout<Value>.alignment - 1)
      / MemoryLayout<Value>.alignment * MemoryLayout<Value>.alignment
    let block = UnsafeMutableRawPointer.allocate(
      byteCount: valueOffset + max(MemoryLayout<Value>.size, 1),
      alignment: max(MemoryLayout<pthread_mutex_t>.alignment, MemoryLayout<Value>.alignment)
    )
    mutex = block.bindMemory(to: pthread_mutex_t.self, capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    let result = pthread_mutex_init(mutex, nil)
    precondition(result == 0, "pthread_mutex_init failed with \(result)")
    value = (block + valueOffset).bindMemory(to: Value.self, capacity: 1)
    value.initialize(to: initial)
  }

  deinit {
    pthread_mutex_destroy(mutex)
    value.deinitialize(count: 1)
    mutex.deinitialize(count: 1)
    UnsafeMutableRawPointer(mutex).deallocate()
  }

  /// Runs `body` with the value, holding the lock.
  ///
  /// - Parameter body: The critical section.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` threw.
  package borrowing func withLock<Result, E: Error>(
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value.pointee)
  }

  /// Runs `body` with the value if the lock is free now; returns `nil` without waiting if not.
  ///
  /// - Parameter body: The critical section.
  /// - Returns: What `body` returned, or `nil` if the lock was held.
  /// - Throws: What `body` threw.
  package borrowing func withLockIfAvailable<Result, E: Error>(
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result? {
    guard pthread_mutex_trylock(mutex) == 0 else { return nil }
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value.pointee)
  }

  /// `withLock`; the owner is not needed, since ThreadSanitizer sees a `pthread_mutex_t`.
  ///
  /// - Parameters:
  ///   - owner: Unused: kept so that call sites read the same with either kind of lock.
  ///   - body: The critical section.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` threw.
  package borrowing func withLock<Result, E: Error>(
    announcingTo owner: AnyObject,
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    try withLock(body)
  }
}

/// The orderings the atomics' members take, named as Synchronization names them.
///
/// A lock orders everything, so each is as strong as sequential consistency here.
package struct OrderlyOrdering: Sendable {
  init() {}
  /// No ordering beyond the value's own.
  package static var relaxed: Self { Self() }
  /// Later reads and writes stay after this load.
  package static var acquiring: Self { Self() }
  /// Earlier reads and writes stay before this store.
  package static var releasing: Self { Self() }
  /// Both.
  package static var acquiringAndReleasing: Self { Self() }
  /// One order that every thread agrees on.
  package static var sequentiallyConsistent: Self { Self() }
}

/// A value read and written atomically: what `Atomic` is where the Synchronization module is
/// available, here a value behind an ``OrderlyMutex``.
package struct OrderlyAtomic<Value: Sendable>: ~Copyable, Sendable {
  private let storage: OrderlyMutex<Value>

  /// An atomic holding `value`.
  ///
  /// - Parameter value: The initial value.
  package init(_ value: Value) {
    storage = OrderlyMutex(value)
  }

  /// The value.
  package borrowing func load(ordering: OrderlyOrdering) -> Value {
    storage.withLock { $0 }
  }

  /// Replaces the value.
  package borrowing func store(_ value: Value, ordering: OrderlyOrdering) {
    storage.withLock { $0 = value }
  }

  /// Replaces the value; returns the one it replaced.
  package borrowing func exchange(_ value: Value, ordering: OrderlyOrdering) -> Value {
    storage.withLock { current in
      let old = current
      current = value
      return old
    }
  }
}

extension OrderlyAtomic where Value: FixedWidthInteger {
  /// Adds `operand`, wrapping on overflow; returns the values before and after.
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyOrdering
  ) -> (oldValue: Value, newValue: Value) {
    storage.withLock { current in
      let old = current
      current = current &+ operand
      return (old, current)
    }
  }

  /// Subtracts `operand`, wrapping on overflow; returns the values before and after.
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyOrdering
  ) -> (oldValue: Value, newValue: Value) {
    storage.withLock { current in
      let old = current
      current = current &- operand
      return (old, current)
    }
  }
}

#else
package import Synchronization

/// A value guarded by a lock: Synchronization's `Mutex`, inline in whatever holds it.
package typealias OrderlyMutex<Value: ~Copyable> = Mutex<Value>

/// A value read and written atomically: Synchronization's `Atomic`.
package typealias OrderlyAtomic<Value: AtomicRepresentable> = Atomic<Value>
#endif
