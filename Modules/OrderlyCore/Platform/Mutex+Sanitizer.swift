internal import COrderlyPrimitives
public import Synchronization

// Tests and tools use it with `Mutex` directly; the modules use `OrderlyLock`.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
extension Mutex where Value: ~Copyable {
  /// `withLock`, with the lock's acquire and release edges announced to ThreadSanitizer.
  ///
  /// ThreadSanitizer cannot see `Mutex`'s own lock on Linux and would report races on the state
  /// it guards. `owner` is any object unique to this mutex (usually the object that stores it);
  /// its address names the lock for the sanitizer. Outside sanitizer builds the announcements
  /// are empty calls.
  ///
  /// - Parameters:
  ///   - owner: An object that lives at least as long as the mutex, unique to it.
  ///   - body: The critical section.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` threw.
  @inlinable
  package borrowing func withLock<Result: ~Copyable, E: Error>(
    announcingTo owner: AnyObject,
    _ body: (inout sending Value) throws(E) -> sending Result
  ) throws(E) -> sending Result {
    try withLock { (value: inout sending Value) throws(E) -> sending Result in
      let address = UnsafeRawPointer(Unmanaged.passUnretained(owner).toOpaque())
      sanitizerAcquire(address)
      defer { sanitizerRelease(address) }
      return try body(&value)
    }
  }
}

@usableFromInline
func sanitizerAcquire(_ address: UnsafeRawPointer) {
  corderly_tsan_acquire(address)
}

@usableFromInline
func sanitizerRelease(_ address: UnsafeRawPointer) {
  corderly_tsan_release(address)
}
