// The locks and atomics of Apple systems, where `Synchronization.Mutex` and `Atomic` need
// macOS 15 / iOS 18 / tvOS 18 / watchOS 11 / visionOS 2, higher than the package's floor: a
// value and an `os_unfair_lock` in one heap block of their own, atomics as the compiler's
// built-ins on a value in a heap block, and the stripe table that guards jobs' state. A stored
// property cannot have a type available only on newer systems, so the choice is made when
// building, not at run time. Linux builds with `-Xswiftc -DORDERLY_PORTABLE_LOCKS` compile this
// file too (a pthread mutex in place of the unfair lock), so CI runs this path's Swift code and
// its tests, under ThreadSanitizer as well. The other path: `Locks+Linux.swift`.

#if ORDERLY_PORTABLE_LOCKS
package import COrderlyPrimitives

/// The heap block behind an ``OrderlyLock``.
///
/// The value is the header, the lock the one element. The lock never moves: it is in this
/// object's own allocation.
package final class LockStorage<Value>: ManagedBuffer<Value, corderly_lock_t> {
  deinit {
    withUnsafeMutablePointerToElements { lock in
      corderly_lock_destroy(lock)
      lock.deinitialize(count: 1)
    }
  }
}

/// A value behind a lock: `Synchronization.Mutex`'s API, on every claimed platform.
package struct OrderlyLock<Value>: ~Copyable, @unchecked Sendable {
  // @unchecked Sendable, proved here: `storage` is only reached through `withLock`, which reads
  // and writes the value only between `corderly_lock_lock` and `corderly_lock_unlock` of the
  // lock beside it; the lock is initialized once, in `init`, before `self` can be shared, and
  // destroyed in `LockStorage.deinit`, when no reference is left. So any value it guards may be
  // shared, as `Mutex` makes it.
  @usableFromInline let storage: LockStorage<Value>

  /// Creates a lock guarding `initialValue`.
  @inlinable
  package init(_ initialValue: consuming sending Value) {
    let value = initialValue
    let buffer = LockStorage<Value>.create(minimumCapacity: 1) { _ in value }
    // `create` is a class method that allocates an instance of the class it is called on, so
    // the buffer is a `LockStorage<Value>`: the documented way to subclass `ManagedBuffer`.
    storage = unsafeDowncast(buffer, to: LockStorage<Value>.self)
    // A lock is a plain C value: `corderly_lock_init` initializes the element's memory.
    storage.withUnsafeMutablePointerToElements { lock in corderly_lock_init(lock) }
  }

  /// Runs `body` with the value, under the lock.
  @inlinable
  package borrowing func withLock<Result: ~Copyable, E: Error>(
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    // The two pointers stay valid after the closure returns: they point into `storage`'s own
    // allocation, which does not move and lives as long as `self`, borrowed for this call.
    let (value, lock) = storage.withUnsafeMutablePointers { ($0, $1) }
    corderly_lock_lock(lock)
    defer { corderly_lock_unlock(lock) }
    return try body(&value.pointee)
  }

  /// Runs `body` with the value, under the lock.
  ///
  /// The lock here is one ThreadSanitizer sees, so nothing is announced; the parameter keeps
  /// one API with `Mutex.withLock(announcingTo:_:)`.
  @inlinable
  package borrowing func withLock<Result: ~Copyable, E: Error>(
    announcingTo owner: AnyObject,
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    try withLock(body)
  }
}

/// Runs `body` under the lock of the stripe table that guards `object`'s state.
///
/// The per-job state on Apple systems: a job's state is a stored property of the job, guarded by
/// a lock of a fixed table picked by the job's address, so a job costs no lock allocation of its
/// own. Objects can share a stripe: `body` must take no other stripe lock, and release nothing
/// whose deinitializer might (user code), which is why jobs drop their work after unlocking.
@inline(__always)
func withStripeLock<Result: ~Copyable, E: Error>(
  of object: AnyObject,
  _ body: () throws(E) -> Result
) throws(E) -> Result {
  let lock = corderly_stripe_for(UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque()))
  corderly_lock_lock(lock)
  defer { corderly_lock_unlock(lock) }
  return try body()
}

/// The heap block behind an ``OrderlyAtomic``: the value as the one element, at an address that
/// never moves, changed only by the C `__atomic` built-ins.
package final class AtomicStorage<Value>: ManagedBuffer<Void, Value> {
  deinit {
    _ = withUnsafeMutablePointerToElements { $0.deinitialize(count: 1) }
  }
}

/// An atomic value, on every claimed platform.
///
/// `Synchronization.Atomic`'s API for the operations Orderly uses. Here it is a value in a heap
/// block of its own, changed with the compiler's atomic built-ins.
package struct OrderlyAtomic<Value: Sendable>: ~Copyable, @unchecked Sendable {
  // @unchecked Sendable, proved here: the value is read and written only through the atomic
  // built-ins (see the extensions below), at an address that does not move.
  @usableFromInline let storage: AtomicStorage<Value>

  /// Creates an atomic value.
  @inlinable
  package init(_ initialValue: Value) {
    let buffer = AtomicStorage<Value>.create(minimumCapacity: 1) { _ in () }
    // `create` allocates an instance of the class it is called on (see `OrderlyLock.init`).
    storage = unsafeDowncast(buffer, to: AtomicStorage<Value>.self)
    storage.withUnsafeMutablePointerToElements { $0.initialize(to: initialValue) }
  }

  /// The value's address: stable, as it is in `storage`'s own allocation, which lives as long
  /// as `self`.
  @inlinable
  var address: UnsafeMutablePointer<Value> {
    storage.withUnsafeMutablePointerToElements { $0 }
  }
}

extension OrderlyAtomicOrdering {
  /// The order, as the C built-ins take it.
  @inlinable
  var cOrder: Int32 {
    switch self {
    case .relaxed: corderly_order_relaxed
    case .acquiring: corderly_order_acquire
    case .releasing: corderly_order_release
    case .acquiringAndReleasing: corderly_order_acq_rel
    case .sequentiallyConsistent: corderly_order_seq_cst
    }
  }

  /// The order for a load: one a load can have.
  @inlinable
  var cLoadOrder: Int32 {
    switch self {
    case .relaxed: corderly_order_relaxed
    case .acquiring, .acquiringAndReleasing: corderly_order_acquire
    case .releasing, .sequentiallyConsistent: corderly_order_seq_cst
    }
  }

  /// The order for a store: one a store can have.
  @inlinable
  var cStoreOrder: Int32 {
    switch self {
    case .relaxed: corderly_order_relaxed
    case .releasing, .acquiringAndReleasing: corderly_order_release
    case .acquiring, .sequentiallyConsistent: corderly_order_seq_cst
    }
  }
}

extension OrderlyAtomic where Value == Bool {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    corderly_bool_load(address, ordering.cLoadOrder)
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    corderly_bool_store(address, desired, ordering.cStoreOrder)
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(_ desired: Value, ordering: OrderlyAtomicOrdering) -> Value {
    corderly_bool_exchange(address, desired, ordering.cOrder)
  }
}

extension OrderlyAtomic where Value == UInt8 {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    corderly_uint8_load(address, ordering.cLoadOrder)
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    corderly_uint8_store(address, desired, ordering.cStoreOrder)
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(_ desired: Value, ordering: OrderlyAtomicOrdering) -> Value {
    corderly_uint8_exchange(address, desired, ordering.cOrder)
  }

  /// Adds `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    let old = corderly_uint8_fetch_add(address, operand, ordering.cOrder)
    return (old, old &+ operand)
  }

  /// Subtracts `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    let old = corderly_uint8_fetch_sub(address, operand, ordering.cOrder)
    return (old, old &- operand)
  }
}

extension OrderlyAtomic where Value == UInt64 {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    corderly_uint64_load(address, ordering.cLoadOrder)
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    corderly_uint64_store(address, desired, ordering.cStoreOrder)
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(_ desired: Value, ordering: OrderlyAtomicOrdering) -> Value {
    corderly_uint64_exchange(address, desired, ordering.cOrder)
  }

  /// Adds `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    let old = corderly_uint64_fetch_add(address, operand, ordering.cOrder)
    return (old, old &+ operand)
  }

  /// Subtracts `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    let old = corderly_uint64_fetch_sub(address, operand, ordering.cOrder)
    return (old, old &- operand)
  }
}

extension OrderlyAtomic where Value == Int {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    corderly_intptr_load(address, ordering.cLoadOrder)
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    corderly_intptr_store(address, desired, ordering.cStoreOrder)
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(_ desired: Value, ordering: OrderlyAtomicOrdering) -> Value {
    corderly_intptr_exchange(address, desired, ordering.cOrder)
  }

  /// Adds `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    let old = corderly_intptr_fetch_add(address, operand, ordering.cOrder)
    return (old, old &+ operand)
  }

  /// Subtracts `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    let old = corderly_intptr_fetch_sub(address, operand, ordering.cOrder)
    return (old, old &- operand)
  }
}
#endif
