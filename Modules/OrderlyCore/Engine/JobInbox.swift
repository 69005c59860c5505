/// Where detached jobs wait, without the queue's lock, while the line is busy; and the
/// counter that numbers every job of the queue.
///
/// A producer that finds jobs already waiting in line, and a running job that will look here
/// when the line has room, puts its job here under this small lock and returns: it never waits
/// for the runner, which holds the queue's lock for longer. Profiling `enqueueDetached` showed a
/// producer and the runner contending for the queue's lock at about a third of a job's cost.
///
/// The queue keeps this rule, checked under its own lock at the end of everything that changes
/// the line: jobs wait here only while the inbox is *watched*, that is while jobs wait in line
/// (so a new one could not start now anyway) and a running job holds a slot (see
/// ``JobLineState/defersAdmissions``). When the line empties, the queue moves every job
/// waiting here into it, in order, before anything else. Operations that need the
/// whole line (counting, cancelling, waiting for idle, admitting other kinds of job) move the
/// waiting jobs first. Jobs here are always newer than every job in the line, so the order of
/// the line is the order of admission.
///
/// Lock order: the queue's lock, then this one. A job is numbered and its `enqueued` event
/// emitted under this lock while the inbox is watched, and under the queue's lock alone while it
/// is not (no producer uses the inbox then), so numbers, events and the line keep one order.
final class JobInbox: Sendable {
  /// A barging lock, not a `Mutex`: producer threads contend for it (see ``BargingLock``).
  private let jobs = BargingLock<[RunnableJob]>([])
  /// Whether jobs may wait here.
  ///
  /// Written only under the queue's lock: from `false` to `true` as a plain store, from `true`
  /// to `false` only under the inbox's lock with no job waiting. So under the queue's lock,
  /// `false` means the inbox is empty and no producer is using it, and the queue needs no inbox
  /// lock at all.
  private let isWatched = OrderlyAtomic<Bool>(false)
  /// The last number handed out.
  ///
  /// Producers advance it under the inbox's lock; the queue under its own lock, and under the
  /// inbox's lock too while the inbox is watched.
  private let lastID = OrderlyAtomic<UInt64>(0)

  /// Keeps `job` here if the inbox is watched, numbering it and reporting it with `announce`.
  ///
  /// - Returns: `false` if the inbox is not watched: the caller must admit the job under the
  ///   queue's lock.
  func keepIfWatched(_ job: RunnableJob, announce: (JobID) -> Void) -> Bool {
    jobs.withLock { jobs in
      guard isWatched.load(ordering: .acquiring) else { return false }
      job.assign(id: number(announce))
      jobs.append(job)
      return true
    }
  }

  /// Keeps an `execute(_:)` closure here if the inbox is watched: in the newest job waiting here
  /// when that is a lane batch and `merging`, otherwise in a new batch, numbered.
  ///
  /// The newest job here is the newest job of the queue, so the closure keeps its place in the
  /// queue's order either way.
  ///
  /// - Returns: `false` if the inbox is not watched: the caller must admit the work under the
  ///   queue's lock.
  func keepLaneWorkIfWatched(_ work: LaneWork, merging: Bool) -> Bool {
    jobs.withLock { jobs in
      guard isWatched.load(ordering: .acquiring) else { return false }
      if merging, let newest = jobs.last, newest.isLane {
        // `isLane` is set only by `LaneBatch`'s initializer.
        unsafeDowncast(newest, to: LaneBatch.self).append(work)
        return true
      }
      let batch = LaneBatch(work)
      // Numbered with no announcement: lane work reports no events (a queue with listeners
      // sends `execute(_:)` closures through `enqueueDetached` instead).
      batch.assign(id: number { _ in })
      jobs.append(batch)
      return true
    }
  }

  /// Takes every waiting job, in order, and hands out the next number, reporting it with
  /// `announce`: the job numbered here goes in line after the jobs taken, and before any job
  /// that waits here later.
  ///
  /// Call it under the queue's lock.
  func takeAllAndNumber(announce: (JobID) -> Void) -> (jobs: [RunnableJob], id: JobID) {
    guard isWatched.load(ordering: .acquiring) else { return ([], number(announce)) }
    return jobs.withLock { jobs in
      (Self.take(&jobs), number(announce))
    }
  }

  /// Takes every waiting job, in order, and runs `body` with them and a way to number one new
  /// job: under the inbox's lock while the inbox is watched, so no producer puts a job here
  /// between the jobs taken and the job numbered.
  ///
  /// Call it under the queue's lock. Numbers handed out by `body` are not announced.
  func takeAll<Result>(
    thenNumbering body: (_ waiting: [RunnableJob], _ number: () -> JobID) -> Result
  ) -> Result {
    guard isWatched.load(ordering: .acquiring) else {
      return body([], { number { _ in } })
    }
    return jobs.withLock { jobs in body(Self.take(&jobs), { number { _ in } }) }
  }

  /// Takes every waiting job, in order, with the last number handed out so far.
  ///
  /// Call it under the queue's lock.
  func takeAll() -> (jobs: [RunnableJob], lastID: UInt64) {
    guard isWatched.load(ordering: .acquiring) else { return ([], lastID.load(ordering: .relaxed)) }
    return jobs.withLock { jobs in
      (Self.take(&jobs), lastID.load(ordering: .relaxed))
    }
  }

  /// Settles the inbox after the line changed: while `watched`, waiting jobs stay here and new
  /// ones may join them; otherwise the waiting jobs are taken for the caller to admit, and the
  /// inbox is closed once it is empty.
  ///
  /// Call it under the queue's lock, repeatedly, until it returns no job. Only closing a watched
  /// inbox takes the inbox's lock.
  ///
  /// - Parameters:
  ///   - watched: Whether jobs may wait here from now on.
  ///   - wasWatched: The value last settled, which the queue keeps under its own lock: reading
  ///     it here instead would touch the cache line that producers write for every job.
  /// - Returns: Jobs taken from the inbox, for the caller to admit; none once it is settled.
  func settle(watched: Bool, wasWatched: Bool) -> [RunnableJob] {
    if watched {
      if !wasWatched { isWatched.store(true, ordering: .releasing) }
      return []
    }
    guard wasWatched else { return [] }
    return jobs.withLock { jobs in
      if jobs.isEmpty {
        isWatched.store(false, ordering: .releasing)
        return []
      }
      return Self.take(&jobs)
    }
  }

  /// How many jobs wait here, for the stall watchdog; call it under the queue's lock.
  var waitingCount: Int { jobs.withLock { $0.count } }

  /// Moves the waiting jobs out, leaving the inbox empty.
  private static func take(_ jobs: inout [RunnableJob]) -> [RunnableJob] {
    var taken: [RunnableJob] = []
    swap(&taken, &jobs)
    return taken
  }

  private func number(_ announce: (JobID) -> Void) -> JobID {
    let id = JobID(rawValue: lastID.add(1, ordering: .relaxed).newValue)
    announce(id)
    return id
  }
}
