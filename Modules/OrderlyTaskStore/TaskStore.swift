internal import DequeModule
public import Observation

/// Something that happened in a ``TaskStore``, in order.
public enum TaskStoreEvent<Key: Hashable & Sendable>: Sendable, Equatable, CustomStringConvertible {
  /// A task started running.
  case started(key: Key, task: UInt64)
  /// A task is waiting for its turn under its policy.
  case waiting(key: Key, task: UInt64)
  /// A task ended.
  case ended(key: Key, task: UInt64, outcome: TaskOutcomeKind)
  /// A call was answered with the handle of a running task.
  case joined(key: Key, task: UInt64)

  /// A line such as `started doThing #3`.
  public var description: String {
    switch self {
    case .started(let key, let task): "started \(key) #\(task)"
    case .waiting(let key, let task): "waiting \(key) #\(task)"
    case .ended(let key, let task, let outcome): "ended \(key) #\(task): \(outcome)"
    case .joined(let key, let task): "joined \(key) #\(task)"
    }
  }
}

/// Runs asynchronous work under keys, so UI code never juggles `Task` handles, with a policy for
/// what happens when a key already has a task (the task management article's open question, answered).
///
/// ```swift
/// @MainActor @Observable final class Model {
///   nonisolated enum TaskKey { case search, save }
///   private let tasks = TaskStore<TaskKey>()
///   private let service = SearchService()
///   var results: [String] = []
///
///   var isSearching: Bool { tasks.isRunning(forKey: .search) }
///
///   func queryChanged(_ text: String) {
///     tasks.addTask(forKey: .search, policy: .cancelPrevious) { [weak self, service] in
///       let found = try await service.search(text)
///       self?.results = found
///     }
///   }
/// }
/// ```
///
/// ## Isolation
///
/// A store is used from one actor: the main actor, or any actor that owns it. Every method takes
/// the caller's actor as a non-optional `isolated` parameter that defaults to `#isolation`, and
/// its tasks run on that actor, as `Task {}` does. The task management article's footnote warns that its store could
/// be called from nonisolated code and race; here such a call does not compile (`#isolation` is
/// `nil` there, and `nil` is not an actor). The store is not `Sendable`, so it cannot be handed to
/// a second actor either.
///
/// ## Key types
///
/// A key is `Hashable & Sendable`: a store's events and handles carry it across actors. In a
/// target whose default isolation is the main actor (`.defaultIsolation(MainActor.self)`, as
/// Xcode 26 sets up an app target), a key type declared there is main-actor isolated, and its
/// `Hashable` conformance too, which such a key cannot use: the compiler says "main
/// actor-isolated conformance of 'TaskKey' to 'Hashable' cannot satisfy conformance requirement
/// for a 'Sendable' type parameter". Declare the key type `nonisolated`, as above.
///
/// ## Identity
///
/// Every task has its own identity: a task that ends only ever removes itself, so an older task
/// of a key never clears the state of a newer one (the bug of the task store it grew from).
///
/// ## Observation
///
/// The store is `Observable`, key by key: a view that reads ``isRunning(forKey:isolation:)``,
/// ``runningCount(forKey:isolation:)``, ``queuedCount(forKey:isolation:)`` or
/// ``state(forKey:isolation:)`` for one key is invalidated only by changes to that key.
///
/// ## Memory
///
/// A key's line is freed as soon as it has nothing running or waiting. Its ``KeyState`` (its
/// count and last outcome) is kept after that, for the ``idleKeyLimit`` keys that went idle most
/// recently (1,000 by default); an older idle key's state is forgotten and reads as a key never
/// used. Each ``events(bufferingNewest:isolation:)`` listener buffers at most the number of
/// events it asks for.
///
/// ## Lifetime
///
/// Releasing the store cancels every task it holds; waiting tasks never run, and their awaiters
/// resume with `CancellationError` at once. A task's closure that captures the model owning the
/// store strongly keeps the model, and so the store, alive while it runs: capture the model
/// weakly in long-running work (`{ [weak self] in ... }`), as `Task {}` would need.
///
/// Available from macOS 14, iOS 17, tvOS 17 and watchOS 10: it is `Observable`, and
/// Observation first shipped with those systems.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
public final class TaskStore<Key: Hashable & Sendable>: Observable {
  /// A key's counters and last result.
  public struct KeyState: Sendable, Equatable {
    /// How many tasks of the key have started running.
    public var performedCount = 0
    /// How the last task of the key to end ended.
    public var lastOutcome: TaskOutcomeKind?
  }

  private enum Requirement {
    /// Starts only when no task of the key runs.
    case exclusive
    /// Starts when fewer than this many tasks of the key run.
    case below(Int)
  }

  private struct Waiting {
    let box: any AnyTaskBox
    let requirement: Requirement
    /// Where the task's own `Task`, made when it was added, waits to be admitted.
    let gate: TurnGate
  }

  private struct Line {
    var running: [any AnyTaskBox] = []
    var waiting: [Waiting] = []

    var liveWaitingCount: Int { waiting.count { !$0.box.isResolved } }
  }

  private var lines: [Key: Line] = [:]
  private var states: [Key: KeyState] = [:]
  /// Keys that went idle, oldest first, with the `idleMarks` value each had then: an entry whose
  /// mark no longer matches is stale (the key was busy again since).
  private var idleKeys = Deque<(key: Key, mark: UInt64)>()
  private var idleMarks: [Key: UInt64] = [:]
  private var lastIdleMark: UInt64 = 0
  private var lastID: UInt64 = 0
  private var listeners: [UInt64: AsyncStream<TaskStoreEvent<Key>>.Continuation] = [:]
  private var lastListener: UInt64 = 0
  private let registrar = ObservationRegistrar()

  /// How many idle keys keep their ``KeyState``; the oldest idle key's is forgotten first.
  public let idleKeyLimit: Int

  /// Creates an empty store.
  ///
  /// - Parameter idleKeyLimit: How many keys with nothing running or waiting keep their
  ///   ``KeyState`` (count and last outcome), the most recently idle first; 1,000 by default.
  ///   A value below 0 counts as 0.
  public init(idleKeyLimit: Int = 1_000) {
    self.idleKeyLimit = max(0, idleKeyLimit)
  }

  deinit {
    for line in lines.values {
      for box in line.running { box.cancel(caller: nil) }
      for waiting in line.waiting {
        waiting.box.setWaitingHook(nil)
        waiting.box.cancel(caller: nil)
      }
    }
    for listener in listeners.values { listener.finish() }
  }

  // MARK: - Adding tasks

  /// Runs `operation` under `key`, as `policy` says when the key already has a task.
  ///
  /// The task runs on the caller's actor, with the caller's task-local values and, unless
  /// `priority` is given, its priority, like `Task {}`.
  ///
  /// - Parameters:
  ///   - key: The key to run the task under.
  ///   - policy: What to do if the key already has a task; ``TaskStorePolicy/cancelPrevious`` by
  ///     default.
  ///   - priority: The task's priority; `nil` inherits the caller's.
  ///   - isolation: The caller's actor; leave the default. Calling from nonisolated code does not
  ///     compile.
  ///   - operation: The task's work.
  /// - Returns: A handle to the task (for ``TaskStorePolicy/joinExisting``, possibly the handle of
  ///   the running task).
  @discardableResult
  public func addTask<Success: Sendable>(
    forKey key: Key,
    policy: TaskStorePolicy = .cancelPrevious,
    priority: TaskPriority? = nil,
    isolation: isolated any Actor = #isolation,
    @_inheritActorContext operation: sending @escaping () async throws -> Success
  ) -> TaskStoreTask<Success> {
    var line = lines[key] ?? Line()
    line.running.removeAll { $0.isResolved }
    idleMarks[key] = nil  // busy again: an idle entry of the key is stale

    if case .joinExisting = policy,
      let existing = line.running.last(where: { $0 is TaskBox<Success> }) as? TaskBox<Success>
    {
      emit(.joined(key: key, task: existing.id))
      return TaskStoreTask(box: existing)
    }

    lastID += 1
    let box = TaskBox<Success>(id: lastID)
    let handle = TaskStoreTask(box: box)
    let run: () async -> Void = {
      _ = isolation
      guard box.begin() else { return }
      do {
        box.resolve(.succeeded(try await operation()))
      } catch is CancellationError {
        box.resolve(.cancelled)
      } catch {
        box.resolve(.failed(error))
      }
    }
    let busy = !line.running.isEmpty || line.liveWaitingCount > 0
    let requirement: Requirement?  // nil: start now
    switch policy {
    case .cancelPrevious:
      cancel(&line, key: key)
      requirement = nil
    case .cancelPreviousAndWait:
      cancel(&line, key: key)
      requirement = line.running.isEmpty ? nil : .exclusive
    case .enqueue:
      requirement = busy ? .exclusive : nil
    case .concurrent(let limit):
      if let limit {
        let limit = max(1, limit)
        let full = line.running.count >= limit || line.liveWaitingCount > 0
        requirement = full ? .below(limit) : nil
      } else {
        requirement = nil
      }
    case .dropNew:
      if busy {
        lines[key] = line
        box.drop(.dropped(key: "\(key)", policy: policy))
        end(box, key: key, outcome: .dropped)
        didChange(key)
        return handle
      }
      requirement = nil
    case .keepLatest:
      for waiting in line.waiting {
        waiting.box.setWaitingHook(nil)
        if !waiting.box.isResolved {
          waiting.box.drop(.dropped(key: "\(key)", policy: policy))
          end(waiting.box, key: key, outcome: .dropped)
        } else {
          // Cancelled while it waited: it ends as cancelled, once.
          end(waiting.box, key: key, outcome: waiting.box.outcomeKind ?? .cancelled)
        }
      }
      line.waiting = []
      requirement = line.running.isEmpty ? nil : .exclusive
    case .joinExisting:
      requirement = nil
    }

    if let requirement {
      let gate = TurnGate()
      line.waiting.append(Waiting(box: box, requirement: requirement, gate: gate))
      lines[key] = line
      emit(.waiting(key: key, task: box.id))
      box.setWaitingHook(waitingHook(forTask: box.id, key: key, isolation: isolation))
      // Made now, in the caller's task: it inherits the caller's task-local values and (unless
      // `priority` is given) priority, as `Task {}` does, not those of the task that will end
      // the one ahead of it.
      let task = Task(priority: priority) { [weak self] in
        _ = isolation  // run on the store's actor
        await gate.wait()
        // Read on the store's actor, where admission happens: not admitted means cancelled
        // first (or the store is gone); its line forgets it on its own.
        guard gate.isOpened else { return }
        await run()
        self?.finished(box, key: key)
      }
      box.attach(task)
    } else {
      lines[key] = line
      start(box, key: key, priority: priority, run: run)
    }
    didChange(key)
    return handle
  }

  private func start(
    _ box: any AnyTaskBox,
    key: Key,
    priority: TaskPriority?,
    run: @escaping () async -> Void,
    isolation: isolated any Actor = #isolation
  ) {
    box.setWaitingHook(nil)
    lines[key, default: Line()].running.append(box)
    states[key, default: KeyState()].performedCount += 1
    emit(.started(key: key, task: box.id))
    let task = Task(priority: priority) { [weak self] in
      _ = isolation  // run on the store's actor
      await run()
      self?.finished(box, key: key)
    }
    box.attach(task)
  }

  /// A waiting task's turn has come: it runs from now on, in the `Task` it was given when added.
  private func admit(_ waiting: Waiting, key: Key) {
    waiting.box.setWaitingHook(nil)
    lines[key, default: Line()].running.append(waiting.box)
    states[key, default: KeyState()].performedCount += 1
    emit(.started(key: key, task: waiting.box.id))
    waiting.gate.open()
  }

  /// A running task ended: forget it (only it), record its outcome, start what may start now.
  private func finished(_ box: any AnyTaskBox, key: Key, isolation: isolated any Actor = #isolation)
  {
    guard var line = lines[key] else { return }
    line.running.removeAll { $0 === box }
    lines[key] = line
    end(box, key: key, outcome: box.outcomeKind ?? .cancelled)
    advance(key)
  }

  /// Starts the waiting tasks of `key` whose turn has come, in order.
  private func advance(_ key: Key, isolation: isolated any Actor = #isolation) {
    guard var line = lines[key] else { return }
    while let head = line.waiting.first {
      // Cancelled, even if not yet resolved: its `Task` may already have seen the cancellation
      // and left, so it must not be admitted.
      if head.box.isResolved || head.box.isCancelled {
        line.waiting.removeFirst()
        end(head.box, key: key, outcome: head.box.outcomeKind ?? .cancelled)
        continue
      }
      let running = line.running.count
      let mayStart =
        switch head.requirement {
        case .exclusive: running == 0
        case .below(let limit): running < limit
        }
      guard mayStart else { break }
      line.waiting.removeFirst()
      lines[key] = line
      admit(head, key: key)
      line = lines[key] ?? Line()
    }
    if line.running.isEmpty && line.waiting.isEmpty {
      lines[key] = nil
      wentIdle(key)
    } else {
      lines[key] = line
    }
    didChange(key)
  }

  /// Tells observers of `key` that its state changed.
  private func didChange(_ key: Key) {
    let path = \TaskStore<Key>.[observedKey: key]
    registrar.willSet(self, keyPath: path)
    registrar.didSet(self, keyPath: path)
  }

  /// Records that `key`'s line is free, and forgets the state of the oldest idle keys beyond
  /// ``idleKeyLimit``.
  private func wentIdle(_ key: Key) {
    lastIdleMark += 1
    idleMarks[key] = lastIdleMark
    idleKeys.append((key, lastIdleMark))
    while idleKeys.count > idleKeyLimit, let oldest = idleKeys.popFirst() {
      guard idleMarks[oldest.key] == oldest.mark, lines[oldest.key] == nil else { continue }
      idleMarks[oldest.key] = nil
      states[oldest.key] = nil
      didChange(oldest.key)
    }
  }

  /// What observation tracks for one key: reading a key's state accesses this path, and any
  /// change to that key (only) is announced on it.
  private subscript(observedKey key: Key) -> Int { 0 }

  private func access(_ key: Key) {
    registrar.access(self, keyPath: \TaskStore<Key>.[observedKey: key])
  }

  /// Records a task's end and announces it, once per task whatever path gets here first.
  private func end(_ box: any AnyTaskBox, key: Key, outcome: TaskOutcomeKind) {
    guard box.markEnded() else { return }
    states[key, default: KeyState()].lastOutcome = outcome
    emit(.ended(key: key, task: box.id, outcome: outcome))
  }

  /// Cancels every task of the line: running ones see `Task.isCancelled`; waiting ones end as
  /// cancelled now and leave the line.
  private func cancel(_ line: inout Line, key: Key) {
    for box in line.running { box.cancel(caller: nil) }
    for waiting in line.waiting {
      waiting.box.setWaitingHook(nil)
      waiting.box.cancel(caller: nil)
      end(waiting.box, key: key, outcome: .cancelled)
    }
    line.waiting = []
  }

  /// What a waiting task tells the store when it is cancelled before it began: the store ends
  /// it then, in order with the other events, instead of when its turn would have come.
  ///
  /// Cancelled on the store's actor, the store settles it before `cancel()` returns; cancelled
  /// elsewhere, as soon as the store's actor runs the settling job.
  private func waitingHook(
    forTask id: UInt64,
    key: Key,
    isolation: isolated any Actor
  ) -> @Sendable ((any Actor)?) -> Void {
    let reference = StoreReference(store: self, actor: isolation)
    return { caller in
      if let caller, caller === reference.actor {
        reference.actor.assumeIsolated { actor in
          reference.settleCancelledWaiting(id, key: key, isolation: actor)
        }
      } else {
        Task { await reference.settleCancelledWaiting(id, key: key, isolation: reference.actor) }
      }
    }
  }

  /// Ends a task cancelled while it waited, and lets the line go on.
  fileprivate func settleCancelledWaiting(
    _ id: UInt64,
    key: Key,
    isolation: isolated any Actor = #isolation
  ) {
    guard var line = lines[key], let index = line.waiting.firstIndex(where: { $0.box.id == id })
    else { return }
    let box = line.waiting.remove(at: index).box
    lines[key] = line
    end(box, key: key, outcome: box.outcomeKind ?? .cancelled)
    advance(key)
  }

  // MARK: - Cancelling

  /// Cancels every task of `key`, running or waiting.
  ///
  /// - Parameters:
  ///   - key: The key whose tasks to cancel.
  ///   - isolation: The caller's actor; leave the default.
  public func cancelTask(forKey key: Key, isolation: isolated any Actor = #isolation) {
    guard var line = lines[key] else { return }
    cancel(&line, key: key)
    lines[key] = line
    advance(key)
  }

  /// Cancels every task of every key.
  ///
  /// - Parameter isolation: The caller's actor; leave the default.
  public func cancelAll(isolation: isolated any Actor = #isolation) {
    for key in Array(lines.keys) { cancelTask(forKey: key) }
  }

  // MARK: - State

  /// Whether a task of `key` is running.
  ///
  /// Observable: a view that reads it updates when it changes.
  ///
  /// - Parameters:
  ///   - key: The key to look at.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: `true` while a task of the key runs.
  public func isRunning(forKey key: Key, isolation: isolated any Actor = #isolation) -> Bool {
    runningCount(forKey: key) > 0
  }

  /// How many tasks of `key` run now.
  ///
  /// - Parameters:
  ///   - key: The key to look at.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The number of running tasks.
  public func runningCount(forKey key: Key, isolation: isolated any Actor = #isolation) -> Int {
    access(key)
    return lines[key]?.running.count { !$0.isResolved } ?? 0
  }

  /// How many tasks of `key` wait for their turn.
  ///
  /// - Parameters:
  ///   - key: The key to look at.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The number of waiting tasks, not counting those cancelled while waiting.
  public func queuedCount(forKey key: Key, isolation: isolated any Actor = #isolation) -> Int {
    access(key)
    return lines[key]?.liveWaitingCount ?? 0
  }

  /// The counters and last outcome of `key`.
  ///
  /// - Parameters:
  ///   - key: The key to look at.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: The key's state; zero and `nil` for a key never used.
  public func state(forKey key: Key, isolation: isolated any Actor = #isolation) -> KeyState {
    access(key)
    return states[key] ?? KeyState()
  }

  /// Everything that happens from now on, in order; ends when the store is freed.
  ///
  /// - Parameters:
  ///   - limit: How many events the listener buffers while it does not read; past that, the
  ///     oldest unread events are dropped. 1,000 by default; a value below 1 counts as 1.
  ///   - isolation: The caller's actor; leave the default.
  /// - Returns: A new, independent listener.
  public func events(
    bufferingNewest limit: Int = 1_000,
    isolation: isolated any Actor = #isolation
  ) -> AsyncStream<TaskStoreEvent<Key>> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: TaskStoreEvent<Key>.self,
      bufferingPolicy: .bufferingNewest(max(1, limit))
    )
    lastListener += 1
    listeners[lastListener] = continuation
    return stream
  }

  private func emit(_ event: TaskStoreEvent<Key>) {
    for (token, listener) in listeners {
      if case .terminated = listener.yield(event) { listeners[token] = nil }
    }
  }
}

/// The store, for a waiting task's cancellation hook, which is `@Sendable` because a task may be
/// cancelled from anywhere.
///
/// `@unchecked Sendable` is safe because the store is only ever touched on `actor`, the actor
/// the store's methods were called on: either inside `actor.assumeIsolated` (which checks it at
/// run time), or in ``settleCancelledWaiting(_:key:isolation:)``, a method isolated to `actor`.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
private struct StoreReference<Key: Hashable & Sendable>: @unchecked Sendable {
  weak var store: TaskStore<Key>?
  let actor: any Actor

  func settleCancelledWaiting(_ id: UInt64, key: Key, isolation: isolated any Actor) {
    store?.settleCancelledWaiting(id, key: key, isolation: isolation)
  }
}
