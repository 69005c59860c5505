internal import COrderlyPrimitives

/// One closure given to `execute(_:)`, on its way from the producer to the runner.
///
/// The closure is not `@Sendable`: `execute(_:)` takes it as `sending`, so no other reference to
/// what it captures exists outside it.
// @unchecked Sendable, proved here: the closure was sent by its caller (`sending`), so moving it
// to another thread races with nothing; from then on it is stored only in a ``LaneBatch``, under
// the locks described there, and called once, by one runner.
struct LaneWork: @unchecked Sendable {
  let body: () -> Void

  init(_ body: sending @escaping () -> Void) {
    self.body = body
  }
}

/// A run of `execute(_:)` closures that takes one place in a queue's line.
///
/// Fire-and-forget work needs none of what a job with a handle pays for (a result, awaiters, a
/// task-local frame, events), so a run of it is one job: admitted, granted and ended once, with
/// its closures called in a plain loop, as a `DispatchQueue` calls its blocks. While the batch
/// waits and is the newest job of its queue, new closures join it instead of making a job each
/// (see ``JobInbox/keepLaneWorkIfWatched(_:merging:makeBatch:)`` and
/// ``JobLineState/openLaneTail(sealedThrough:)``); once anything else is admitted after it, or
/// it starts, it takes no more. That keeps the queue's one order: every closure in it was
/// enqueued after every job ahead of it and before every job behind it.
///
/// A batch has no handle, so it is cancelled only by `cancelAll()`: before it starts, its
/// closures are dropped unrun; while it runs, the closures after the running one are.
// @unchecked Sendable, restated from ``RunnableJob`` and proved there and at `work`.
final class LaneBatch: RunnableJob, @unchecked Sendable {
  /// The batch's closures, in order, until it runs or is cancelled.
  ///
  /// Kept as ``LaneWork`` values, not as bare closures: an array of a function type stores each
  /// closure behind a reabstraction thunk, a heap allocation per closure (measured: 65 bytes per
  /// pending closure, against 17 for this).
  // Safe: appended to only while the batch waits and is the newest job of its queue: under the
  // inbox's lock while it is in the inbox, under the queue's lock while it is the tail of the
  // line (the inbox hands its jobs to the line under both locks). It is granted under the queue's
  // lock, after which nothing appends; the runner takes the closures in `begin`, under the job's
  // lock, after the grant; `dropWork` runs only after `cancelWaiting` moved the batch from
  // `.waiting` to `.cancelled` under the queue's lock (from the wakeup it collects, once that
  // lock is released, on the same thread), so no append or take follows it.
  nonisolated(unsafe) private var work: ContiguousArray<LaneWork>

  /// A batch holding one closure.
  init(_ first: LaneWork) {
    work = [first]
    super.init(name: nil, priority: nil, isBarrier: false, isSynchronous: true, isLane: true)
  }

  /// Adds a closure after the ones already in the batch; see `work` for who may call it.
  func append(_ next: LaneWork) {
    work.append(next)
  }

  /// How many closures the batch holds; see `work` for who may call it.
  var count: Int { work.count }

  override func dropWork() {
    work = []
  }

  override func run(in task: RunningTask?, owner: JobQueueCore) async -> RunReport {
    let (report, pinned) = runSynchronously(in: task, owner: owner)
    if pinned { await parkUntilUnpinned() }
    return report
  }

  override func runSynchronously(
    in task: RunningTask?,
    owner: JobQueueCore
  ) -> (RunReport, pinned: Bool) {
    let taken = begin(in: task, owner: owner) { () -> ContiguousArray<LaneWork>? in
      var taken = ContiguousArray<LaneWork>()
      swap(&taken, &self.work)
      return taken
    }
    guard let closures = taken else { return end(with: .failure(CancellationError())) }
    // `isCurrent` inside the closures: the thread says which queue runs them (no task-local is
    // bound, so a task a closure starts does not count as the queue's).
    let previous = corderly_running_lane_get()
    corderly_running_lane_set(Unmanaged.passUnretained(owner).toOpaque())
    var completed = true
    for closure in closures {
      // `cancelAll()` cancels the runner's task while the batch runs: the rest are dropped.
      if Task.isCancelled {
        completed = false
        break
      }
      closure.body()
    }
    corderly_running_lane_set(previous)
    return end(with: completed ? .void : .failure(CancellationError()))
  }
}

extension JobQueueCore {
  /// Whether the current thread is running a batch of this queue's `execute(_:)` closures.
  var isRunningLaneWorkHere: Bool {
    corderly_running_lane_get() == UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
  }
}
