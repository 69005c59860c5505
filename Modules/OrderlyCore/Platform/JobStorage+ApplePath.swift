// Where jobs keep their locked state on Apple systems: in the job's own allocation, guarded by
// the lock of the stripe table that the job's address picks (`withStripeLock(of:_:)`), so a job
// costs no lock allocation of its own. The other path: `JobStorage+Linux.swift`.

#if ORDERLY_PORTABLE_LOCKS
/// The state and number of a ``RunnableJob``, on Apple systems.
// @unchecked Sendable, proved here: `lockedState` is read and written only inside `withState`,
// under the stripe lock of this object, so the lock orders every access (and makes it exclusive,
// so the run-time check is left out); `rawIDValue` is written once by `assign(id:)`, under the
// queue's lock before the job is shared (that lock's release publishes it to every thread that
// later finds the job in line), and only read afterwards.
class RunnableJobStorage: @unchecked Sendable {
  @exclusivity(unchecked) private final var lockedState = ErasedJobState()
  private final var rawIDValue: UInt64 = 0

  init() {}

  /// Runs `body` on the job's state, under the job's stripe lock.
  @inline(__always)
  final func withState<Result>(
    _ body: (inout sending ErasedJobState) -> sending Result
  ) -> sending Result {
    withStripeLock(of: self) { body(&lockedState) }
  }

  /// The job's number, assigned once before the job is shared.
  final var id: JobID { JobID(rawValue: rawIDValue) }

  /// Numbers the job; called once, under the queue's lock, before the job is put in line.
  final func assign(id: JobID) {
    rawIDValue = id.rawValue
  }
}

/// The state of a ``TurnNode``, on Apple systems.
// @unchecked Sendable, proved here: `lockedState` is read and written only inside `withState`,
// under the stripe lock of this object.
class TurnNodeStorage: @unchecked Sendable {
  @exclusivity(unchecked) private final var lockedState: TurnNodeState

  init(state: TurnNodeState) {
    lockedState = state
  }

  /// Runs `body` on the node's state, under the node's stripe lock.
  @inline(__always)
  final func withState<Result>(
    _ body: (inout sending TurnNodeState) -> sending Result
  ) -> sending Result {
    withStripeLock(of: self) { body(&lockedState) }
  }
}
#endif
