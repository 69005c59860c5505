import DequeModule

/// The line of a ``SerialQueue`` and its one running job, guarded by the queue's lock.
///
/// Invariant: when no job is running the line is empty, because ``advance(queueName:)`` gives
/// the next live entry its turn as soon as the running one finishes. Cancelled entries stay in
/// the line as tombstones (so cancelling is O(1)) and are skipped when they reach the head, or
/// swept out once they outnumber the live ones.
struct SerialQueueState {
  enum Entry {
    case turn(TurnNode)
    case detached(any RunnableJob)

    var id: JobID {
      switch self {
      case .turn(let node): node.id
      case .detached(let job): job.id
      }
    }

    var name: String? {
      switch self {
      case .turn(let node): node.name
      case .detached(let job): job.name
      }
    }

    var isIdleWaiter: Bool {
      if case .turn(let node) = self, node.purpose == .idleWaiter { return true }
      return false
    }

    var isCancelledWhileWaiting: Bool {
      switch self {
      case .turn(let node): node.isCancelledWhileWaiting
      case .detached(let job): job.isCancelledWhileWaiting
      }
    }

    func grant(into wakeups: inout Wakeups) -> Bool {
      switch self {
      case .turn(let node): node.grant(into: &wakeups)
      case .detached(let job): job.grant(into: &wakeups)
      }
    }

    func cancelWaiting(into wakeups: inout Wakeups) -> Bool {
      switch self {
      case .turn(let node): node.cancelWaiting(into: &wakeups)
      case .detached(let job): job.cancelWaiting(into: &wakeups)
      }
    }

    func cancelRunning(into wakeups: inout Wakeups) {
      switch self {
      case .turn(let node): node.cancelRunning(into: &wakeups)
      case .detached(let job): job.cancelRunning(into: &wakeups)
      }
    }
  }

  /// What the queue must do after the running job finished.
  enum Next {
    /// Nothing is left to run.
    case idle
    /// A job that runs in its own task was given its turn and resumes by itself.
    case resumed
    /// A detached job was given its turn and needs a runner task.
    case run(any RunnableJob)
  }

  private(set) var line = Deque<Entry>()
  private(set) var running: Entry?
  /// Live jobs in the line (not tombstones, not idle waiters).
  private(set) var pendingCount = 0
  private var tombstones = 0
  private var lastID: UInt64 = 0
  private var subscribers: [UInt64: AsyncStream<QueueEvent>.Continuation] = [:]
  private var lastSubscriberID: UInt64 = 0

  var isIdle: Bool { running == nil }

  mutating func nextID() -> JobID {
    lastID += 1
    return JobID(rawValue: lastID)
  }

  /// Puts a job in line, or makes it the running job at once if the queue is idle.
  ///
  /// - Returns: `true` if the job has its turn now.
  mutating func admit(_ entry: Entry, queueName: String) -> Bool {
    emit(.enqueued, for: entry, queueName: queueName)
    if running == nil {
      // Nobody waits on a new entry yet, so granting it has nothing to wake.
      var nothingToWake = Wakeups()
      _ = entry.grant(into: &nothingToWake)
      running = entry
      emit(.started, for: entry, queueName: queueName)
      return true
    }
    line.append(entry)
    pendingCount += 1
    return false
  }

  /// Puts a `waitUntilIdle` waiter in line behind every job.
  ///
  /// - Returns: `false` if the queue is idle already, so there is nothing to wait for.
  mutating func admitIdleWaiter(_ node: TurnNode) -> Bool {
    guard running != nil else { return false }
    line.append(.turn(node))
    return true
  }

  /// Ends the running job and gives the next live entry its turn.
  mutating func finish(
    _ id: JobID,
    outcome: JobOutcome,
    queueName: String,
    wakeups: inout Wakeups
  ) -> Next {
    guard let finished = running, finished.id == id else { return .idle }
    switch outcome {
    case .succeeded: emit(.finished, for: finished, queueName: queueName)
    case .failed(let error): emit(.failed(error), for: finished, queueName: queueName)
    case .cancelled: emit(.cancelled, for: finished, queueName: queueName)
    }
    running = nil
    return advance(queueName: queueName, wakeups: &wakeups)
  }

  private mutating func advance(queueName: String, wakeups: inout Wakeups) -> Next {
    while let entry = line.popFirst() {
      guard entry.grant(into: &wakeups) else {
        tombstones -= 1
        continue
      }
      if entry.isIdleWaiter { continue }
      pendingCount -= 1
      running = entry
      emit(.started, for: entry, queueName: queueName)
      switch entry {
      case .turn: return .resumed
      case .detached(let job): return .run(job)
      }
    }
    return .idle
  }

  /// Cancels a waiting entry in O(1): it stays in line as a tombstone.
  ///
  /// - Returns: `true` if the entry was waiting and is now cancelled.
  mutating func cancelWaiting(
    _ entry: Entry,
    queueName: String,
    wakeups: inout Wakeups
  ) -> Bool {
    guard entry.cancelWaiting(into: &wakeups) else { return false }
    tombstones += 1
    if !entry.isIdleWaiter {
      pendingCount -= 1
      emit(.cancelled, for: entry, queueName: queueName)
    }
    sweepTombstonesIfNeeded()
    return true
  }

  /// Drops tombstones once they outnumber live entries, so cancelled jobs never pile up.
  ///
  /// Each sweep is O(n) and follows at least n/2 cancellations: amortized O(1) per cancel.
  private mutating func sweepTombstonesIfNeeded() {
    guard tombstones > 64, tombstones * 2 > line.count else { return }
    line.removeAll { $0.isCancelledWhileWaiting }
    tombstones = 0
  }

  /// Cancels every waiting entry and requests cancellation of the running one.
  mutating func cancelAll(queueName: String, wakeups: inout Wakeups) {
    running?.cancelRunning(into: &wakeups)
    let cancelled = line
    line = []
    pendingCount = 0
    tombstones = 0
    for entry in cancelled where entry.cancelWaiting(into: &wakeups) && !entry.isIdleWaiter {
      emit(.cancelled, for: entry, queueName: queueName)
    }
  }

  /// Requests cancellation of the entry if it is the running one.
  func cancelIfRunning(_ id: JobID, wakeups: inout Wakeups) {
    guard let running, running.id == id else { return }
    running.cancelRunning(into: &wakeups)
  }

  // MARK: Events

  mutating func subscribe(_ continuation: AsyncStream<QueueEvent>.Continuation) -> UInt64 {
    lastSubscriberID += 1
    subscribers[lastSubscriberID] = continuation
    return lastSubscriberID
  }

  /// Ends every listener's sequence; called when the queue is freed.
  mutating func finishSubscribers() {
    for subscriber in subscribers.values { subscriber.finish() }
    subscribers = [:]
  }

  /// Delivers an event to every listener, dropping listeners whose sequence has ended.
  ///
  /// With no listener this is one branch: no clock read, no allocation.
  ///
  /// `yield` never runs the listener's code; a listener that went away is noticed here, not in
  /// an `onTermination` callback, which could run inside a task's cancellation and would have to
  /// take the queue's lock.
  mutating func emit(_ kind: QueueEvent.Kind, for entry: Entry, queueName: String) {
    guard !subscribers.isEmpty else { return }
    let event = QueueEvent(
      kind: kind,
      jobID: entry.id,
      jobName: entry.name,
      queueName: queueName,
      timestamp: .now
    )
    for (token, subscriber) in subscribers {
      if case .terminated = subscriber.yield(event) { subscribers[token] = nil }
    }
  }
}
