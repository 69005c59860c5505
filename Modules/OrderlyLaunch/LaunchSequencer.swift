public import Observation

/// How a step in a ``LaunchSequencer``'s history ended.
public enum LaunchOutcome: String, Sendable, Equatable, CustomStringConvertible {
  /// Its `run()` returned.
  case completed
  /// Its `shouldRun()` returned `false`, so it did not run.
  case skipped
  /// It was cancelled by ``LaunchSequencer/cancelAll()``.
  case cancelled
  /// It ran longer than its `timeout`; it was cancelled and the next step started.
  case timedOut = "timed out"

  /// The outcome in words, as in `timed out`.
  public var description: String { rawValue }
}

/// A step that has ended, in a ``LaunchSequencer``'s ``LaunchSequencer/history``.
public struct LaunchRecord: Sendable, Equatable, CustomStringConvertible {
  /// The step's name.
  public let name: String
  /// The step's identifier.
  public let id: String
  /// How it ended.
  public let outcome: LaunchOutcome
  /// How long it took, from the moment it was taken from the line, on the sequencer's clock.
  public let duration: Duration

  /// Creates a record.
  ///
  /// - Parameters:
  ///   - name: The step's name.
  ///   - id: The step's identifier.
  ///   - outcome: How it ended.
  ///   - duration: How long it took.
  public init(name: String, id: String, outcome: LaunchOutcome, duration: Duration) {
    self.name = name
    self.id = id
    self.outcome = outcome
    self.duration = duration
  }

  /// `PasscodeLaunchStep: completed`.
  public var description: String { "\(name): \(outcome)" }
}

/// Something that happened in a ``LaunchSequencer``, in order.
public enum LaunchEvent: Sendable, Equatable, CustomStringConvertible {
  /// A step joined the line.
  case enqueued(name: String)
  /// A step was not queued because one with the same id was pending or running.
  case deduplicated(name: String)
  /// A step was taken from the line and is starting.
  case started(name: String)
  /// A step ended.
  case ended(LaunchRecord)
  /// A pending step was removed by `cancelAll()` before it started.
  case removed(name: String)
  /// The sequencer stopped starting steps.
  case suspended
  /// The sequencer started steps again.
  case resumed

  /// A line such as `started PasscodeLaunchStep`.
  public var description: String {
    switch self {
    case .enqueued(let name): "enqueued \(name)"
    case .deduplicated(let name): "deduplicated \(name)"
    case .started(let name): "started \(name)"
    case .ended(let record): "ended \(record)"
    case .removed(let name): "removed \(name)"
    case .suspended: "suspended"
    case .resumed: "resumed"
    }
  }
}

/// Runs ``LaunchStep``s one at a time, in the order they were enqueued, on the main actor.
///
/// The replacement for an `OperationQueue` of modal operations (the serial-modals article): at launch and on every
/// return to the foreground the app enqueues its steps from synchronous code, and the sequencer
/// runs them one after another.
///
/// ```swift
/// sequencer.enqueue(AppUpgradeNudgeStep(...))
/// sequencer.enqueue(PasscodeStep(...))
/// sequencer.enqueue(RemoveLaunchScreenStep())
/// ```
///
/// ## De-duplication
///
/// The serial-modals article enqueues the same steps on launch *and* on every foreground. By default
/// (``Deduplication/pendingOrRunning``) a step whose ``LaunchStep/id`` matches a step that is
/// pending or running is not queued again; once that step has ended, the same id may be queued
/// anew. Pass ``Deduplication/none`` to queue every step.
///
/// ## Timing
///
/// ``LaunchStep/shouldRun()`` is asked just before a step would start. A step with a
/// ``LaunchStep/timeout`` that overruns it (on the injected clock) is cancelled, recorded as
/// timed out, and the next step starts at once; its task is left to wind down by itself.
///
/// ## State
///
/// The sequencer is `@Observable`: ``currentStep``, ``pendingSteps``, ``history``,
/// ``isIdle`` and ``isSuspended`` update views as they change. ``events`` reports the same
/// changes as a sequence.
///
/// Available from macOS 14, iOS 17, tvOS 17 and watchOS 10: it is `@Observable`, and
/// Observation first shipped with those systems.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class LaunchSequencer {
  /// Which steps count as duplicates.
  public enum Deduplication: Sendable {
    /// A step is not queued while a step with the same id is pending or running.
    case pendingOrRunning
    /// Every step is queued.
    case none
  }

  /// The step running now, if any.
  public private(set) var currentStep: (any LaunchStep)?
  /// The steps waiting, in the order they will run.
  public private(set) var pendingSteps: [any LaunchStep] = []
  /// Every step that has ended, oldest first.
  public private(set) var history: [LaunchRecord] = []
  /// Whether the sequencer holds back new steps (see ``suspend()``).
  public private(set) var isSuspended = false

  /// Whether no step is running or waiting.
  public var isIdle: Bool { currentStep == nil && pendingSteps.isEmpty }

  @ObservationIgnored private let deduplication: Deduplication
  @ObservationIgnored private let now: @Sendable () -> Duration
  @ObservationIgnored private let sleep: @Sendable (Duration) async throws -> Void
  /// The running step's task, and a number that tells its end from a later step's.
  @ObservationIgnored private var running: (task: Task<Void, Never>, generation: UInt64)?
  @ObservationIgnored private var generation: UInt64 = 0
  @ObservationIgnored private var idleWaiters: [CheckedContinuation<Void, Never>] = []
  @ObservationIgnored private var listeners: [UInt64: AsyncStream<LaunchEvent>.Continuation] = [:]
  @ObservationIgnored private var lastListener: UInt64 = 0

  /// Creates an idle sequencer.
  ///
  /// - Parameters:
  ///   - clock: The clock timeouts and durations are measured on; real time by default.
  ///   - deduplication: Which steps count as duplicates; by default a step whose id is pending or
  ///     running.
  public init<C: Clock>(
    clock: C = ContinuousClock(),
    deduplication: Deduplication = .pendingOrRunning
  ) where C.Duration == Duration {
    let origin = clock.now
    self.now = { origin.duration(to: clock.now) }
    self.sleep = { duration in try await clock.sleep(for: duration) }
    self.deduplication = deduplication
  }

  // MARK: - Steps

  /// Adds a step to the end of the line and starts it if nothing runs.
  ///
  /// - Parameter step: The step to run.
  /// - Returns: `false` if the step was not queued because a step with the same id is pending or
  ///   running.
  @discardableResult
  public func enqueue(_ step: any LaunchStep) -> Bool {
    if deduplication == .pendingOrRunning {
      let ids = pendingSteps.map(\.id) + (currentStep.map { [$0.id] } ?? [])
      if ids.contains(step.id) {
        emit(.deduplicated(name: step.name))
        return false
      }
    }
    pendingSteps.append(step)
    emit(.enqueued(name: step.name))
    startNextIfPossible()
    return true
  }

  /// Cancels the running step and removes every pending one, at once.
  ///
  /// The running step's task is cancelled and the step is recorded as cancelled; the sequencer
  /// is idle when this returns. Steps enqueued afterwards run as usual.
  public func cancelAll() {
    let removed = pendingSteps
    pendingSteps = []
    for step in removed { emit(.removed(name: step.name)) }
    if let step = currentStep, let running {
      running.task.cancel()
      self.running = nil
      currentStep = nil
      record(step, .cancelled, startedAt: startedAt)
    }
    resumeIdleWaitersIfIdle()
  }

  /// Lets the running step finish but starts no new step until ``resume()``.
  ///
  /// For example while a system alert is up. Steps may still be enqueued.
  public func suspend() {
    guard !isSuspended else { return }
    isSuspended = true
    emit(.suspended)
  }

  /// Starts steps again after ``suspend()``.
  public func resume() {
    guard isSuspended else { return }
    isSuspended = false
    emit(.resumed)
    startNextIfPossible()
  }

  /// Returns when no step is running or waiting.
  ///
  /// While the sequencer is suspended with steps pending, this waits until it is resumed and
  /// they have run (or `cancelAll()` removes them).
  public func waitUntilIdle() async {
    if isIdle { return }
    await withCheckedContinuation { idleWaiters.append($0) }
  }

  /// Everything that happens from now on, in order; ends when the sequencer is freed.
  ///
  /// Each read starts an independent listener.
  public var events: AsyncStream<LaunchEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: LaunchEvent.self)
    lastListener += 1
    listeners[lastListener] = continuation
    return stream
  }

  isolated deinit {
    for listener in listeners.values { listener.finish() }
    running?.task.cancel()
  }

  // MARK: - Running steps

  @ObservationIgnored private var startedAt: Duration = .zero

  private func startNextIfPossible() {
    guard currentStep == nil, !isSuspended, !pendingSteps.isEmpty else { return }
    let step = pendingSteps.removeFirst()
    currentStep = step
    startedAt = now()
    generation += 1
    let generation = generation
    emit(.started(name: step.name))
    let task = Task { [weak self] in
      let outcome = await Self.perform(step, sleep: self?.sleep)
      self?.stepEnded(step, outcome: outcome, generation: generation)
    }
    running = (task, generation)
  }

  /// Asks the step whether to run, then runs it, racing its timeout.
  private static func perform(
    _ step: any LaunchStep,
    sleep: (@Sendable (Duration) async throws -> Void)?
  ) async -> LaunchOutcome {
    guard await step.shouldRun() else {
      return Task.isCancelled ? .cancelled : .skipped
    }
    if Task.isCancelled { return .cancelled }
    guard let timeout = step.timeout, let sleep else {
      await step.run()
      return .completed
    }
    let race = FirstOutcome()
    let work = Task { @MainActor in
      await step.run()
      race.settle(.completed)
    }
    let timer = Task { @MainActor in
      do {
        try await sleep(timeout)
        work.cancel()
        race.settle(.timedOut)
      } catch {
        // Cancelled: the step ended first, or the sequencer cancelled it.
      }
    }
    let outcome = await withTaskCancellationHandler {
      await race.value
    } onCancel: {
      work.cancel()
      timer.cancel()
      Task { @MainActor in race.settle(.cancelled) }
    }
    timer.cancel()
    return outcome
  }

  private func stepEnded(_ step: any LaunchStep, outcome: LaunchOutcome, generation: UInt64) {
    // A step cancelled by cancelAll() was recorded then; a newer step may be running now.
    guard let running, running.generation == generation else { return }
    self.running = nil
    currentStep = nil
    record(step, outcome, startedAt: startedAt)
    startNextIfPossible()
    resumeIdleWaitersIfIdle()
  }

  private func record(_ step: any LaunchStep, _ outcome: LaunchOutcome, startedAt: Duration) {
    let record = LaunchRecord(
      name: step.name,
      id: step.id,
      outcome: outcome,
      duration: now() - startedAt
    )
    history.append(record)
    emit(.ended(record))
  }

  private func resumeIdleWaitersIfIdle() {
    guard isIdle, !idleWaiters.isEmpty else { return }
    let waiters = idleWaiters
    idleWaiters = []
    for waiter in waiters { waiter.resume() }
  }

  private func emit(_ event: LaunchEvent) {
    for (token, listener) in listeners {
      if case .terminated = listener.yield(event) { listeners[token] = nil }
    }
  }
}

/// The first of several outcomes to arrive, on the main actor.
@MainActor
private final class FirstOutcome {
  private var outcome: LaunchOutcome?
  private var waiter: CheckedContinuation<LaunchOutcome, Never>?

  func settle(_ outcome: LaunchOutcome) {
    guard self.outcome == nil else { return }
    self.outcome = outcome
    waiter?.resume(returning: outcome)
    waiter = nil
  }

  var value: LaunchOutcome {
    get async {
      if let outcome { return outcome }
      return await withCheckedContinuation { waiter = $0 }
    }
  }
}
