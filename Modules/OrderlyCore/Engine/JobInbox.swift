import Synchronization

/// Where detached jobs wait, without the queue's lock, while the line is busy; and the
/// counter that numbers every job of the queue.
///
/// A producer that finds the line busy (every slot taken, or jobs already waiting) and a running
/// job that will look here when the line has room, puts its job here under this small lock and
/// returns: it never waits for the runner, which holds the queue's lock for longer. Profiling
/// `enqueueDetached` showed a producer and the runner contending for the queue's lock at about
/// a third of a job's cost.
///
/// The queue keeps this rule, checked under its own lock at the end of everything that changes
/// the line: jobs wait here only while the inbox is *watched*, that is while a job runs that
/// holds a slot and no new job could start now anyway. When the line has room again, the queue
/// moves every waiting job into it, in order, before anything else. Operations that need the
/// whole line (counting, cancelling, waiting for idle, admitting other kinds of job) move the
/// waiting jobs first. Jobs here are always newer than every job in the line, so the order of
/// the line is the order of admission.
///
/// Lock order: the queue's lock, then this one. Jobs are numbered and their `enqueued` events
/// emitted under this lock only, so numbers and events follow one order.
final class JobInbox: Sendable {
  private struct State {
    var jobs: [any RunnableJob] = []
    var lastID: UInt64 = 0
    var isWatched = false
  }

  private let state = Mutex(State())

  /// Keeps `job` here if the inbox is watched, numbering it and reporting it with `announce`.
  ///
  /// - Returns: `false` if the inbox is not watched: the caller must admit the job under the
  ///   queue's lock.
  func keepIfWatched(_ job: any RunnableJob, announce: (JobID) -> Void) -> Bool {
    state.withLock(announcingTo: self) { state in
      guard state.isWatched else { return false }
      state.lastID += 1
      let id = JobID(rawValue: state.lastID)
      job.assign(id: id)
      announce(id)
      state.jobs.append(job)
      return true
    }
  }

  /// Hands out the next number, reporting it with `announce` under the inbox lock.
  ///
  /// Call it under the queue's lock, after ``takeAll()``, so the job numbered here comes after
  /// every job that waited in the inbox.
  func nextID(announce: (JobID) -> Void) -> JobID {
    state.withLock(announcingTo: self) { state in
      state.lastID += 1
      let id = JobID(rawValue: state.lastID)
      announce(id)
      return id
    }
  }

  /// Takes every waiting job, in order, with the last number handed out so far.
  ///
  /// Call it under the queue's lock.
  func takeAll() -> (jobs: [any RunnableJob], lastID: UInt64) {
    state.withLock(announcingTo: self) { state in
      guard !state.jobs.isEmpty else { return ([], state.lastID) }
      var jobs: [any RunnableJob] = []
      swap(&jobs, &state.jobs)
      return (jobs, state.lastID)
    }
  }

  /// Settles the inbox after the line changed: leaves the waiting jobs here and keeps the inbox
  /// watched if `watched`; otherwise takes them (if any) for the caller to admit, or marks the
  /// inbox unwatched once it is empty.
  ///
  /// Call it under the queue's lock, repeatedly, until it returns no job.
  func settle(watched: Bool) -> [any RunnableJob] {
    state.withLock(announcingTo: self) { state in
      if watched || state.jobs.isEmpty {
        state.isWatched = watched
        return []
      }
      var jobs: [any RunnableJob] = []
      swap(&jobs, &state.jobs)
      return jobs
    }
  }
}
