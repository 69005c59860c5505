import DequeModule
import Dispatch

/// A task executor with threads of its own, for work that blocks: SQLite calls, file I/O, a C
/// library that waits.
///
/// Swift's cooperative pool has one thread per core. A job that blocks one of them (a 1 ms
/// `sqlite3_step`, a `read(2)`) takes that thread from every other task in the process, so
/// unrelated work waits. Give a queue this executor, and its jobs run here instead, in the same
/// order and under the same contracts:
///
/// ```swift
/// let disk = DedicatedThreadExecutor(name: "disk")
/// let writes = SerialQueue(name: "writes", executor: disk)
/// writes.enqueueDetached { try blockingWrite(record) }  // runs on the "disk" thread
/// ```
///
/// Jobs run in the order they are enqueued, on the first free thread; with one thread (the
/// default) they run one at a time. The threads live as long as the executor is used: create
/// one for the life of the program (a `static let`), and call ``shutdown()`` if it must end
/// sooner.
///
/// - Important: An executor *preference* moves only nonisolated code. A job isolated to an
///   actor (enqueued from the main actor, say) still runs on that actor; it is the nonisolated
///   work (detached jobs, `nonisolated` functions the job calls) that runs on these threads.
///   Task-local values and priorities are unaffected; the threads do not change their own
///   scheduling priority with the task's.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
public final class DedicatedThreadExecutor: TaskExecutor, Sendable {
  private struct State {
    var jobs = Deque<UnownedJob>()
    var stopping = false
  }

  /// The executor's name, given to its threads on Apple's systems.
  public let name: String
  /// How many threads run its jobs.
  public let threadCount: Int

  private let state = OrderlyLock(State())
  /// Counts queued jobs (and, on shutdown, one wake-up per thread).
  private let available = DispatchSemaphore(value: 0)
  private let stopped = DispatchSemaphore(value: 0)

  /// Starts the executor's threads.
  ///
  /// - Precondition: `threads` is 1 or more; anything else stops the program with a message
  ///   saying so.
  /// - Parameters:
  ///   - name: A name for the executor (and its threads, on Apple's systems).
  ///   - threads: How many threads run jobs; 1 by default.
  public init(name: String = "orderly.blocking", threads: Int = 1) {
    precondition(threads >= 1, "DedicatedThreadExecutor needs 1 thread or more; got \(threads)")
    self.name = name
    self.threadCount = threads
    for _ in 0..<threads { startThread() }
  }

  /// Runs `job` on one of the executor's threads, after the jobs enqueued before it.
  ///
  /// - Parameter job: The job, from the concurrency runtime.
  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let accepted = state.withLock(announcingTo: self) { state -> Bool in
      if state.stopping { return false }
      state.jobs.append(unowned)
      return true
    }
    // A job enqueued after shutdown still runs (dropping it would leave its task suspended
    // for ever), on Swift's cooperative pool: not inline on the enqueuing thread, where it
    // would run inside its enqueuer's call (a `Task(...)` being created, a continuation being
    // resumed, perhaps under its caller's lock).
    guard accepted else {
      globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
      return
    }
    available.signal()
  }

  /// Runs the jobs already enqueued, then ends the threads; returns once they have ended.
  ///
  /// Jobs enqueued afterwards still run, in order for a queue, on Swift's cooperative pool
  /// (`globalConcurrentExecutor`) instead of these threads: never on the thread that enqueues
  /// them, inside its call. Do not call it from one of the executor's own threads.
  public func shutdown() {
    let first = state.withLock(announcingTo: self) { state -> Bool in
      defer { state.stopping = true }
      return !state.stopping
    }
    guard first else { return }
    for _ in 0..<threadCount { available.signal() }
    for _ in 0..<threadCount { stopped.wait() }
  }

  /// The loop each thread runs: take the next job, run it; end once stopping and drained.
  private func work() {
    while true {
      available.wait()
      let (job, stop) = state.withLock(announcingTo: self) {
        state -> (UnownedJob?, Bool) in
        if let job = state.jobs.popFirst() { return (job, false) }
        return (nil, state.stopping)
      }
      if let job {
        job.runSynchronously(on: asUnownedTaskExecutor())
      } else if stop {
        stopped.signal()
        return
      }
    }
  }

  private func startThread() {
    // The thread holds the executor until it ends; it is named where the platform allows.
    let created = DetachedThread.start(named: name) { self.work() }
    precondition(created == 0, "DedicatedThreadExecutor could not start a thread: error \(created)")
  }
}
