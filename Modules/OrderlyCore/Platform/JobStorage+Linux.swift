// Where jobs keep their locked state on Linux: a `Mutex` in the job (announced to
// ThreadSanitizer, which cannot see it), and an atomic number. The other path:
// `JobStorage+ApplePath.swift`.

#if !ORDERLY_PORTABLE_LOCKS
/// The state and number of a ``RunnableJob``, on Linux.
// @unchecked Sendable, proved here: a class that is not final cannot be checked by the compiler;
// both stored properties are `let`s of Sendable types (a lock and an atomic).
class RunnableJobStorage: @unchecked Sendable {
  private let state = OrderlyLock(ErasedJobState())
  private let rawID = OrderlyAtomic<UInt64>(0)

  init() {}

  /// Runs `body` on the job's state, under the job's lock.
  @inline(__always)
  final func withState<Result>(
    _ body: (inout sending ErasedJobState) -> sending Result
  ) -> sending Result {
    state.withLock(announcingTo: self, body)
  }

  /// The job's number, assigned once before the job is shared.
  final var id: JobID { JobID(rawValue: rawID.load(ordering: .relaxed)) }

  /// Numbers the job; called once, under the queue's lock, before the job is put in line.
  final func assign(id: JobID) {
    rawID.store(id.rawValue, ordering: .relaxed)
  }
}

/// The state of a ``TurnNode``, on Linux.
// @unchecked Sendable, proved here: a class that is not final cannot be checked by the compiler;
// its one stored property is a `let` lock.
class TurnNodeStorage: @unchecked Sendable {
  private let state: OrderlyLock<TurnNodeState>

  init(state: TurnNodeState) {
    self.state = OrderlyLock(state)
  }

  /// Runs `body` on the node's state, under the node's lock.
  @inline(__always)
  final func withState<Result>(
    _ body: (inout sending TurnNodeState) -> sending Result
  ) -> sending Result {
    state.withLock(announcingTo: self, body)
  }
}
#endif
