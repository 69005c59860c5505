// The locks and atomics of Linux: `Synchronization.Mutex` and `Atomic` themselves, every call
// inlined. The other path: `Locks+ApplePath.swift`.

#if !ORDERLY_PORTABLE_LOCKS
package import Synchronization

/// A value behind a lock.
///
/// On Linux, a `Synchronization.Mutex`, with every call inlined.
package struct OrderlyLock<Value: ~Copyable>: ~Copyable, Sendable {
  @usableFromInline let mutex: Mutex<Value>

  /// Creates a lock guarding `initialValue`.
  @inlinable
  package init(_ initialValue: consuming sending Value) {
    mutex = Mutex(initialValue)
  }

  /// Runs `body` with the value, under the lock.
  @inlinable
  package borrowing func withLock<Result: ~Copyable, E: Error>(
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    try mutex.withLock(body)
  }

  /// `withLock`, with the lock's acquire and release edges announced to ThreadSanitizer, which
  /// cannot see `Mutex`'s own lock on Linux (see `Mutex.withLock(announcingTo:_:)`).
  @inlinable
  package borrowing func withLock<Result: ~Copyable, E: Error>(
    announcingTo owner: AnyObject,
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    try mutex.withLock(announcingTo: owner, body)
  }
}

/// An atomic value.
///
/// On Linux, a `Synchronization.Atomic`, with every call inlined.
///
/// The operations are written out per value type, and each ordering in a `switch`:
/// `Synchronization` defines them per storage size and takes only a literal ordering.
package struct OrderlyAtomic<Value: AtomicRepresentable & Sendable>: ~Copyable, Sendable {
  @usableFromInline let atomic: Atomic<Value>

  /// Creates an atomic value.
  @inlinable
  package init(_ initialValue: consuming Value) {
    atomic = Atomic(initialValue)
  }
}

extension OrderlyAtomic where Value == Bool {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    switch ordering {
    case .relaxed: atomic.load(ordering: .relaxed)
    case .acquiring, .acquiringAndReleasing: atomic.load(ordering: .acquiring)
    case .releasing, .sequentiallyConsistent: atomic.load(ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    switch ordering {
    case .relaxed: atomic.store(desired, ordering: .relaxed)
    case .releasing, .acquiringAndReleasing: atomic.store(desired, ordering: .releasing)
    case .acquiring, .sequentiallyConsistent:
      atomic.store(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(
    _ desired: Value,
    ordering: OrderlyAtomicOrdering
  ) -> Value {
    switch ordering {
    case .relaxed: atomic.exchange(desired, ordering: .relaxed)
    case .acquiring: atomic.exchange(desired, ordering: .acquiring)
    case .releasing: atomic.exchange(desired, ordering: .releasing)
    case .acquiringAndReleasing: atomic.exchange(desired, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.exchange(desired, ordering: .sequentiallyConsistent)
    }
  }
}

extension OrderlyAtomic where Value == Int {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    switch ordering {
    case .relaxed: atomic.load(ordering: .relaxed)
    case .acquiring, .acquiringAndReleasing: atomic.load(ordering: .acquiring)
    case .releasing, .sequentiallyConsistent: atomic.load(ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    switch ordering {
    case .relaxed: atomic.store(desired, ordering: .relaxed)
    case .releasing, .acquiringAndReleasing: atomic.store(desired, ordering: .releasing)
    case .acquiring, .sequentiallyConsistent:
      atomic.store(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(
    _ desired: Value,
    ordering: OrderlyAtomicOrdering
  ) -> Value {
    switch ordering {
    case .relaxed: atomic.exchange(desired, ordering: .relaxed)
    case .acquiring: atomic.exchange(desired, ordering: .acquiring)
    case .releasing: atomic.exchange(desired, ordering: .releasing)
    case .acquiringAndReleasing: atomic.exchange(desired, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.exchange(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Adds `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    switch ordering {
    case .relaxed: atomic.wrappingAdd(operand, ordering: .relaxed)
    case .acquiring: atomic.wrappingAdd(operand, ordering: .acquiring)
    case .releasing: atomic.wrappingAdd(operand, ordering: .releasing)
    case .acquiringAndReleasing: atomic.wrappingAdd(operand, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.wrappingAdd(operand, ordering: .sequentiallyConsistent)
    }
  }

  /// Subtracts `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    switch ordering {
    case .relaxed: atomic.wrappingSubtract(operand, ordering: .relaxed)
    case .acquiring: atomic.wrappingSubtract(operand, ordering: .acquiring)
    case .releasing: atomic.wrappingSubtract(operand, ordering: .releasing)
    case .acquiringAndReleasing: atomic.wrappingSubtract(operand, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent:
      atomic.wrappingSubtract(operand, ordering: .sequentiallyConsistent)
    }
  }
}

extension OrderlyAtomic where Value == UInt8 {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    switch ordering {
    case .relaxed: atomic.load(ordering: .relaxed)
    case .acquiring, .acquiringAndReleasing: atomic.load(ordering: .acquiring)
    case .releasing, .sequentiallyConsistent: atomic.load(ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    switch ordering {
    case .relaxed: atomic.store(desired, ordering: .relaxed)
    case .releasing, .acquiringAndReleasing: atomic.store(desired, ordering: .releasing)
    case .acquiring, .sequentiallyConsistent:
      atomic.store(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(
    _ desired: Value,
    ordering: OrderlyAtomicOrdering
  ) -> Value {
    switch ordering {
    case .relaxed: atomic.exchange(desired, ordering: .relaxed)
    case .acquiring: atomic.exchange(desired, ordering: .acquiring)
    case .releasing: atomic.exchange(desired, ordering: .releasing)
    case .acquiringAndReleasing: atomic.exchange(desired, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.exchange(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Adds `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    switch ordering {
    case .relaxed: atomic.wrappingAdd(operand, ordering: .relaxed)
    case .acquiring: atomic.wrappingAdd(operand, ordering: .acquiring)
    case .releasing: atomic.wrappingAdd(operand, ordering: .releasing)
    case .acquiringAndReleasing: atomic.wrappingAdd(operand, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.wrappingAdd(operand, ordering: .sequentiallyConsistent)
    }
  }

  /// Subtracts `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    switch ordering {
    case .relaxed: atomic.wrappingSubtract(operand, ordering: .relaxed)
    case .acquiring: atomic.wrappingSubtract(operand, ordering: .acquiring)
    case .releasing: atomic.wrappingSubtract(operand, ordering: .releasing)
    case .acquiringAndReleasing: atomic.wrappingSubtract(operand, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent:
      atomic.wrappingSubtract(operand, ordering: .sequentiallyConsistent)
    }
  }
}

extension OrderlyAtomic where Value == UInt64 {
  /// The current value.
  @inlinable
  package borrowing func load(ordering: OrderlyAtomicOrdering) -> Value {
    switch ordering {
    case .relaxed: atomic.load(ordering: .relaxed)
    case .acquiring, .acquiringAndReleasing: atomic.load(ordering: .acquiring)
    case .releasing, .sequentiallyConsistent: atomic.load(ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value.
  @inlinable
  package borrowing func store(_ desired: Value, ordering: OrderlyAtomicOrdering) {
    switch ordering {
    case .relaxed: atomic.store(desired, ordering: .relaxed)
    case .releasing, .acquiringAndReleasing: atomic.store(desired, ordering: .releasing)
    case .acquiring, .sequentiallyConsistent:
      atomic.store(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Replaces the value and returns the one it replaced.
  @inlinable
  package borrowing func exchange(
    _ desired: Value,
    ordering: OrderlyAtomicOrdering
  ) -> Value {
    switch ordering {
    case .relaxed: atomic.exchange(desired, ordering: .relaxed)
    case .acquiring: atomic.exchange(desired, ordering: .acquiring)
    case .releasing: atomic.exchange(desired, ordering: .releasing)
    case .acquiringAndReleasing: atomic.exchange(desired, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.exchange(desired, ordering: .sequentiallyConsistent)
    }
  }

  /// Adds `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func add(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    switch ordering {
    case .relaxed: atomic.wrappingAdd(operand, ordering: .relaxed)
    case .acquiring: atomic.wrappingAdd(operand, ordering: .acquiring)
    case .releasing: atomic.wrappingAdd(operand, ordering: .releasing)
    case .acquiringAndReleasing: atomic.wrappingAdd(operand, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent: atomic.wrappingAdd(operand, ordering: .sequentiallyConsistent)
    }
  }

  /// Subtracts `operand`, wrapping on overflow, and returns the values before and after.
  @inlinable
  @discardableResult
  package borrowing func subtract(
    _ operand: Value,
    ordering: OrderlyAtomicOrdering
  ) -> (oldValue: Value, newValue: Value) {
    switch ordering {
    case .relaxed: atomic.wrappingSubtract(operand, ordering: .relaxed)
    case .acquiring: atomic.wrappingSubtract(operand, ordering: .acquiring)
    case .releasing: atomic.wrappingSubtract(operand, ordering: .releasing)
    case .acquiringAndReleasing: atomic.wrappingSubtract(operand, ordering: .acquiringAndReleasing)
    case .sequentiallyConsistent:
      atomic.wrappingSubtract(operand, ordering: .sequentiallyConsistent)
    }
  }
}
#endif
