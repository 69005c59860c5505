/// A handle to one job on a queue, like the `Task` that `Task {}` returns.
///
/// Use it to await the job's result, or to cancel the job. Dropping the handle neither cancels nor
/// drops the job: it runs anyway, as a `Task` does. Two handles are equal when they refer to the
/// same job.
public struct QueuedTask<Success: Sendable>: Sendable, Hashable {
  enum Backing: Sendable {
    /// An `enqueue` job, running in its own task.
    case attached(Task<Success, any Error>, TurnNode)
    /// An `enqueueDetached` job, run by the queue's runner.
    case detached(DetachedJob<Success>)
  }

  let backing: Backing
  let owner: any JobQueueBackend

  init(backing: Backing, owner: any JobQueueBackend) {
    self.backing = backing
    self.owner = owner
  }

  /// The job's identifier on its queue.
  public var id: JobID {
    switch backing {
    case .attached(_, let node): node.id
    case .detached(let job): job.id
    }
  }

  /// The name given to the job when it was enqueued, if any.
  public var name: String? {
    switch backing {
    case .attached(_, let node): node.name
    case .detached(let job): job.name
    }
  }

  private var isOver: Bool {
    switch backing {
    case .attached(_, let node): node.isOver
    case .detached(let job): job.isOver
    }
  }

  /// The job's result, once it has ended.
  ///
  /// Waits for the job to end and returns what its operation returned, or throws what it threw,
  /// unchanged. A job cancelled before it started throws `CancellationError`.
  ///
  /// Like `Task.value`, waiting is not cancellable: cancelling the waiting task does not cancel
  /// the job and does not end the wait. Call ``cancel()`` to cancel the job.
  ///
  /// - Important: Awaiting a job that has not ended from inside a job of the same serial or concurrent queue can
  ///   only deadlock, so it throws ``QueueError/reentrantWait(queue:)`` at once.
  /// - Throws: The job's own error, `CancellationError`, or ``QueueError``.
  public var value: Success {
    get async throws {
      if !isOver {
        try JobFrame.checkNotInside(owner)
        // Awaiting a Task raises its priority; a job waiting in line needs the jobs ahead of it
        // raised too, or it waits for them at their priority.
        switch backing {
        case .attached(_, let node):
          owner.escalateForAwaiter(of: node.id, jobPriority: node.basePriority)
        case .detached(let job):
          owner.escalateForAwaiter(of: job.id, jobPriority: job.basePriority)
        }
      }
      switch backing {
      case .attached(let task, _): return try await task.value
      case .detached(let job): return try await job.result().get()
      }
    }
  }

  /// The job's outcome as a `Result`, once it has ended.
  ///
  /// The same as ``value``, with the error (including a reentrant wait) as a failure.
  public var result: Result<Success, any Error> {
    get async {
      do {
        return .success(try await value)
      } catch {
        return .failure(error)
      }
    }
  }

  /// Cancels the job.
  ///
  /// A job that has not started leaves the line at once: it never runs, and whoever awaits it
  /// resumes with `CancellationError`. A running job sees `Task.isCancelled` become `true`; it
  /// decides itself when to stop. Cancelling a job that has ended does nothing. Safe to call from
  /// any thread, any number of times.
  public func cancel() {
    switch backing {
    case .attached(let task, let node):
      owner.cancel(node)
      task.cancel()
    case .detached(let job):
      owner.cancel(job)
    }
  }

  /// Whether the job had its turn the moment it was enqueued.
  ///
  /// It was given a slot at once, with nothing ahead of it in line. An app module that mirrors its engine's state reads it to
  /// report such a job as running before `enqueue` returns.
  package var startedAtAdmission: Bool {
    switch backing {
    case .attached(_, let node): node.isGrantedAtAdmission
    case .detached: false
    }
  }

  /// Whether the job has been given its turn (a slot) and has not ended.
  ///
  /// Read after a change that may give it its turn (a job ending, `setLimit(_:)`), it says
  /// whether that change did. For the app modules' mirrors of their engine's state.
  package var hasTurn: Bool {
    switch backing {
    case .attached(_, let node): node.hasTurn
    case .detached: false
    }
  }

  /// Whether ``cancel()`` was called, or the queue cancelled the job (for example with
  /// `cancelAll()`).
  public var isCancelled: Bool {
    switch backing {
    case .attached(let task, let node): task.isCancelled || node.wasCancelled
    case .detached(let job): job.isCancelled
    }
  }

  /// Whether two handles refer to the same job.
  public static func == (lhs: QueuedTask, rhs: QueuedTask) -> Bool {
    lhs.identity == rhs.identity
  }

  /// Hashes the job's identity.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(identity)
  }

  private var identity: ObjectIdentifier {
    switch backing {
    case .attached(_, let node): ObjectIdentifier(node)
    case .detached(let job): ObjectIdentifier(job)
    }
  }
}
