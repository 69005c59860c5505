internal import DequeModule
public import Observation
internal import OrderlyCore

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
/// ## One engine
///
/// Each busy key is a line of `OrderlyCore`'s engine, the one under `SerialQueue` and every
/// other Orderly queue, and each policy a rule for when a task may start on it: the engine
/// starts a key's tasks in the order they were added and makes each task's `Task` when it is
/// added, in the caller's context. A task's ``TaskStoreEvent/started(key:task:)`` is reported
/// when the engine gives it its turn: at once, inside `addTask`, when it starts at once; when
/// its work begins on the store's actor, when it waited.
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

  /// A key's tasks: its line in `OrderlyCore`'s engine, which decides when each starts, and
  /// the store's record of which have begun, for the key's state and events.
  private struct Line {
    /// The engine's line: admission order and each task's rule (see ``addTask``).
    let queue: ConcurrentQueue
    /// Tasks whose work has begun (or was given its turn the moment it was added), oldest first.
    var running: [any AnyTaskBox] = []
    /// Tasks in the engine's line that have not begun.
    var waiting: [any AnyTaskBox] = []

    init(queue: ConcurrentQueue) {
      self.queue = queue
    }

    var liveWaitingCount: Int { waiting.count { !$0.isResolved } }
  }

  private var lines: [Key: Line] = [:]
  /// The engine's line of a key that went idle, kept for the next key to get busy: a store whose
  /// keys take turns being busy (the usual case) makes one line, not one per busy spell.
  private var spareQueue: ConcurrentQueue?
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
      for box in line.running + line.waiting {
        box.setWaitingHook(nil)
        box.cancel(caller: nil)
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
    var line = lines[key] ?? Line(queue: takeQueue())
    line.running.removeAll { box in
      // Cancelled before its work began, from another actor: its end is recorded now.
      guard box.isResolved else { return false }
      end(box, key: key, outcome: box.outcomeKind ?? .cancelled)
      return true
    }
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
    let busy = !line.running.isEmpty || line.liveWaitingCount > 0
    // The policy as an admission rule on the key's line in the engine: how few of the key's
    // tasks may run for this one to start. The line starts tasks in the order they were added.
    let startsBelow: Int
    switch policy {
    case .cancelPrevious, .joinExisting:
      if case .cancelPrevious = policy { cancel(&line, key: key) }
      startsBelow = .max
    case .cancelPreviousAndWait:
      cancel(&line, key: key)
      startsBelow = 1
    case .enqueue:
      startsBelow = 1
    case .concurrent(let limit):
      startsBelow = max(1, limit ?? .max)
    case .dropNew:
      if busy {
        lines[key] = line
        box.drop(.dropped(key: "\(key)", policy: policy))
        end(box, key: key, outcome: .dropped)
        didChange(key)
        return handle
      }
      startsBelow = .max
    case .keepLatest:
      for waiting in line.waiting {
        waiting.setWaitingHook(nil)
        if !waiting.isResolved {
          waiting.drop(.dropped(key: "\(key)", policy: policy))
          end(waiting, key: key, outcome: .dropped)
        } else {
          // Cancelled while it waited: it ends as cancelled, once.
          end(waiting, key: key, outcome: waiting.outcomeKind ?? .cancelled)
        }
      }
      line.waiting = []
      startsBelow = 1
    }

    // The engine makes the task's `Task` now, in the caller's task: it inherits the caller's
    // task-local values and (unless `priority` is given) priority, as `Task {}` does, not those
    // of the task that ends the one ahead of it.
    let job = line.queue.enqueue(priority: priority, startingWhenFewerThan: startsBelow) {
      [weak self] () async -> Void in
      _ = isolation  // run on the store's actor
      guard box.begin() else {
        // Cancelled or dropped before its work began: a waiting task was settled then; one
        // given its turn when it was added ends now.
        self?.finished(box, key: key)
        return
      }
      self?.began(box, key: key)
      do {
        box.resolve(.succeeded(try await operation()))
      } catch is CancellationError {
        box.resolve(.cancelled)
      } catch {
        box.resolve(.failed(error))
      }
      self?.finished(box, key: key)
    }
    if job.startedAtAdmission {
      // Given its turn at once: it is running from now on, for the key's state and events.
      line.running.append(box)
      lines[key] = line
      states[key, default: KeyState()].performedCount += 1
      emit(.started(key: key, task: box.id))
    } else {
      line.waiting.append(box)
      lines[key] = line
      emit(.waiting(key: key, task: box.id))
      box.setWaitingHook(waitingHook(forTask: box.id, key: key, isolation: isolation))
    }
    box.attach(job, startedAtOnce: job.startedAtAdmission)
    didChange(key)
    return handle
  }

  /// A task's work begins: a task that waited is running from now on.
  private func began(_ box: any AnyTaskBox, key: Key, isolation: isolated any Actor = #isolation) {
    guard var line = lines[key], let index = line.waiting.firstIndex(where: { $0 === box })
    else { return }  // started at once: already counted as running
    line.waiting.remove(at: index)
    line.running.append(box)
    lines[key] = line
    states[key, default: KeyState()].performedCount += 1
    emit(.started(key: key, task: box.id))
    didChange(key)
  }

  /// A running task ended: forget it (only it), record its outcome, free the key if idle.
  private func finished(_ box: any AnyTaskBox, key: Key, isolation: isolated any Actor = #isolation)
  {
    guard var line = lines[key] else { return }
    line.running.removeAll { $0 === box }
    lines[key] = line
    end(box, key: key, outcome: box.outcomeKind ?? .cancelled)
    freeIfIdle(key)
  }

  /// Forgets `key`'s line once nothing of it runs or waits (the engine starts the tasks whose
  /// turn has come on its own), and tells observers the key changed.
  private func freeIfIdle(_ key: Key, isolation: isolated any Actor = #isolation) {
    guard let line = lines[key] else { return }
    if line.running.isEmpty && line.waiting.isEmpty {
      lines[key] = nil
      if spareQueue == nil { spareQueue = line.queue }
      wentIdle(key)
    }
    didChange(key)
  }

  /// A line for a key that gets busy: the spare one if its last task has left the engine.
  private func takeQueue() -> ConcurrentQueue {
    if let spare = spareQueue, spare.isIdle {
      spareQueue = nil
      return spare
    }
    return ConcurrentQueue(name: "TaskStore", limit: .max)
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
    for box in line.running {
      box.setWaitingHook(nil)  // settled by its own end, below or when its work returns
      box.cancel(caller: nil)
    }
    line.running.removeAll { box in
      // Given its turn at once but cancelled before its work began: it ends as cancelled now.
      guard box.isResolved else { return false }
      end(box, key: key, outcome: box.outcomeKind ?? .cancelled)
      return true
    }
    for waiting in line.waiting {
      waiting.setWaitingHook(nil)
      waiting.cancel(caller: nil)
      end(waiting, key: key, outcome: .cancelled)
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

  /// Ends a task cancelled while it waited, and frees the key if nothing else of it is left.
  fileprivate func settleCancelledWaiting(
    _ id: UInt64,
    key: Key,
    isolation: isolated any Actor = #isolation
  ) {
    guard var line = lines[key], let index = line.waiting.firstIndex(where: { $0.id == id })
    else { return }
    let box = line.waiting.remove(at: index)
    lines[key] = line
    end(box, key: key, outcome: box.outcomeKind ?? .cancelled)
    freeIfIdle(key)
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
    freeIfIdle(key)
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
