// OrderlyCore's platform room: everything that differs between the systems Orderly runs on is
// in this folder, in whole files per platform, and nothing outside it asks which system it is
// built for.
//
// | concern | Apple systems | Linux |
// |---|---|---|
// | locks and atomics (`OrderlyLock`, `OrderlyAtomic`) | `Locks+ApplePath.swift` | `Locks+Linux.swift` |
// | a job's locked state (`RunnableJobStorage`, `TurnNodeStorage`) | `JobStorage+ApplePath.swift` (the stripe table) | `JobStorage+Linux.swift` (a `Mutex` per job) |
// | the lock producers share (`BargingLock`) | `BargingLock.swift` (a pthread mutex on both) | |
// | threads of their own (`DetachedThread`: the dedicated executor's, the watchdog's) | `Threads.swift` | |
// | the stall watchdog's system calls (`SystemCalls`) | `SystemCalls.swift` | |
// | ThreadSanitizer's view of `Mutex` | `Mutex+Sanitizer.swift` | |
//
// The choice of path is named once, in Package.swift: it defines `ORDERLY_PORTABLE_LOCKS` for
// OrderlyCore on Apple systems, where `Synchronization.Mutex` and `Atomic` need macOS 15 / iOS 18,
// higher than the package's floor. Building on Linux with `-Xswiftc -DORDERLY_PORTABLE_LOCKS`
// selects the Apple path there too (a pthread mutex in place of `os_unfair_lock`), which is how
// CI compiles it with warnings as errors and runs its concurrency tests under ThreadSanitizer.
// The C side of the room is the target `COrderlyPrimitives`: the lock type, the stripe table,
// the atomic built-ins, ThreadSanitizer's announcements and the thread-local slot of `execute`.

/// The memory orderings an `OrderlyAtomic` operation asks for.
///
/// They are named as `Synchronization`'s. An ordering a kind of operation does not have (a
/// releasing load, an acquiring store) is made sequentially consistent. The lock-based
/// `OrderlyAtomic` makes every operation sequentially consistent, at least as strong as any
/// ordering asked for.
package enum OrderlyAtomicOrdering: Sendable {
  /// No ordering beyond the operation's own atomicity.
  case relaxed
  /// An acquiring load or update.
  case acquiring
  /// A releasing store or update.
  case releasing
  /// An update that acquires and releases.
  case acquiringAndReleasing
  /// Sequentially consistent.
  case sequentiallyConsistent
}
