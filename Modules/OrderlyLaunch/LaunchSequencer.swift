public import Observation
internal import OrderlyCore

/// How a step in a ``LaunchSequencer``'s history ended.
public enum LaunchOutcome: String, Sendable, Equatable, CustomStringConvertible {
  /// Its `run()` returned.
  case completed
  /// Its `shouldRun()` returned `false`, so it did not run.
  case skipped
  /// It was cancelled by ``LaunchSequencer/cancelAll()`` (or removed by it before it started).
  case cancelled
  /// It ran longer than its `timeout`; it was cancelled, and the next step started once its
  /// `run()` had returned.
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
  /// How long it took, from the moment it was taken from the line until its `run()` returned,
  /// on the sequencer's clock.
  public let duration: Duration
  /// Whether, once cancelled or timed out, its `run()` took longer than the sequencer's grace
  /// period to return (``LaunchEvent/stillRunning(name:after:)`` said so while it did).
  public let overranGracePeriod: Bool

  /// Creates a record.
  ///
  /// - Parameters:
  ///   - name: The step's name.
  ///   - id: The step's identifier.
  ///   - outcome: How it ended.
  ///   - duration: How long it took.
  ///   - overranGracePeriod: Whether its `run()` returned only after the grace period.
  public init(
    name: String,
    id: String,
    outcome: LaunchOutcome,
    duration: Duration,
    overranGracePeriod: Bool = false
  ) {
    self.name = name
    self.id = id
    self.outcome = outcome
    self.duration = duration
    self.overranGracePeriod = overranGracePeriod
  }

  /// `PasscodeLaunchStep: completed`, and `(returned after the grace period)` when it overran.
  public var description: String {
    "\(name): \(outcome)" + (overranGracePeriod ? " (returned after the grace period)" : "")
  }
}

/// Something that happened in a ``LaunchSequencer``, in order.
public enum LaunchEvent: Sendable, Equatable, CustomStringConvertible {
  /// A step joined the line.
  case enqueued(name: String)
  /// A step was not queued because one with the same id was pending or running.
  case deduplicated(name: String)
  /// A step was taken from the line and is starting.
  case started(name: String)
  /// A step ended: its `run()` returned (or it did not run).
  case ended(LaunchRecord)
  /// A step cancelled or timed out had not returned from `run()` within the grace period; the
  /// next step waits until it does, so two steps are never on screen together.
  case stillRunning(name: String, after: Duration)
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
    case .stillRunning(let name, let after):
      "still running \(name) \(after) after it was cancelled"
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
/// ``LaunchStep/timeout`` that overruns it (on the injected clock) is cancelled and recorded as
/// timed out.
///
/// ## One step at a time, always
///
/// A modal that is still leaving the screen is still on it, so "one at a time" means one
/// `run()` at a time. A step cancelled by its timeout or by ``cancelAll()`` stays the
/// ``currentStep`` until its `run()` returns; only then is it recorded and does the next step
/// start. A step should return soon after its task is cancelled; one that has not returned
/// within the grace period (one second by default, on the injected clock) is reported, as a
/// ``LaunchEvent/stillRunning(name:after:)`` event and in its ``LaunchRecord``, and the line
/// keeps waiting for it: the next step never starts beside it.
///
/// The line is a line of `OrderlyCore`'s engine, the one under every Orderly queue, with one
/// slot: a step's job holds it until the step's `run()` has returned, so the next step cannot
/// start beside it, and ``suspend()`` takes the slot away. A step is the ``currentStep`` from
/// the moment the engine gives it the slot: at once when it is enqueued with nothing running,
/// otherwise when the main actor runs its job after the step ahead has ended. A step given the
/// slot just before ``suspend()`` waits, still pending, until ``resume()``.
///
/// ## Waiting
///
/// ``enqueueAndWait(_:)`` enqueues a step and returns its record when it has ended; ``waitUntilIdle()``
/// returns when nothing runs or waits. Both end early when the waiting task is cancelled; the
/// steps themselves are not cancelled by that.
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
  /// The steps that have ended, oldest first: the last ``historyLimit`` of them (100 by
  /// default); older records are dropped as new ones arrive.
  public private(set) var history: [LaunchRecord] = []
  /// How many records ``history`` keeps.
  @ObservationIgnored public let historyLimit: Int
  /// Whether the sequencer holds back new steps (see ``suspend()``).
  public private(set) var isSuspended = false

  /// Whether no step is running or waiting.
  public var isIdle: Bool { currentStep == nil && pendingSteps.isEmpty }

  @ObservationIgnored private let deduplication: Deduplication
  @ObservationIgnored private let gracePeriod: Duration
  /// The running step's token and the pending steps' tokens, in line order: what a
  /// ``enqueueAndWait(_:)`` caller waits for.
  @ObservationIgnored private var currentToken: UInt64?
  @ObservationIgnored private var pendingTokens: [UInt64] = []
  @ObservationIgnored private var lastToken: UInt64 = 0
  /// Whether the running step, cancelled, has outlived the grace period.
  @ObservationIgnored private var currentOverran = false
  @ObservationIgnored private var stepWaiters:
    [UInt64: [UInt64: CheckedContinuation<LaunchRecord?, Never>]] = [:]
  @ObservationIgnored private var lastWaiter: UInt64 = 0
  @ObservationIgnored private let now: @Sendable () -> Duration
  @ObservationIgnored private let sleep: @Sendable (Duration) async throws -> Void
  /// The line the steps run on.
  ///
  /// A line of `OrderlyCore`'s engine with one slot (none while suspended). A step's job holds the slot until its `run()` has returned, even cancelled or
  /// timed out, so two steps' `run()` never overlap.
  @ObservationIgnored private let line = ConcurrentQueue(name: "LaunchSequencer", limit: 1)
  /// The engine's job of each pending step and of the running one, by token.
  @ObservationIgnored private var jobs: [UInt64: QueuedTask<Void>] = [:]
  /// Started by ``cancelAll()`` for the running step: says so if its `run()` outlives the grace
  /// period; cancelled when the step ends.
  @ObservationIgnored private var graceWatch: Task<Void, Never>?
  @ObservationIgnored private var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
  /// Jobs given their turn while the sequencer was suspended, waiting for ``resume()``.
  @ObservationIgnored private var resumeWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
  @ObservationIgnored private var listeners: [UInt64: AsyncStream<LaunchEvent>.Continuation] = [:]
  @ObservationIgnored private var lastListener: UInt64 = 0

  /// Creates an idle sequencer.
  ///
  /// - Parameters:
  ///   - clock: The clock timeouts and durations are measured on; real time by default.
  ///   - deduplication: Which steps count as duplicates; by default a step whose id is pending or
  ///     running.
  ///   - gracePeriod: How long a cancelled or timed-out step's `run()` may take to return before
  ///     the sequencer reports it (``LaunchEvent/stillRunning(name:after:)``); one second by
  ///     default. The next step waits for it however long it takes.
  ///   - historyLimit: How many records ``history`` keeps, the newest; 100 by default. A value
  ///     below 0 counts as 0.
  public init<C: Clock>(
    clock: C = ContinuousClock(),
    deduplication: Deduplication = .pendingOrRunning,
    gracePeriod: Duration = .seconds(1),
    historyLimit: Int = 100
  ) where C.Duration == Duration {
    self.historyLimit = max(0, historyLimit)
    let origin = clock.now
    self.now = { origin.duration(to: clock.now) }
    self.sleep = { duration in try await clock.sleep(for: duration) }
    self.deduplication = deduplication
    self.gracePeriod = gracePeriod
  }

  // MARK: - Steps

  /// Adds a step to the end of the line and starts it if nothing runs.
  ///
  /// - Parameter step: The step to run.
  /// - Returns: `false` if the step was not queued because a step with the same id is pending or
  ///   running.
  @discardableResult
  public func enqueue(_ step: any LaunchStep) -> Bool {
    admit(step) != nil
  }

  /// Enqueues `step` as ``enqueue(_:)`` does and returns its record once it has ended.
  ///
  /// When a step with the same id is already pending or running (and the sequencer
  /// de-duplicates), `step` is not queued, and this returns the record of that step instead:
  /// the step asked for has run.
  ///
  /// - Parameter step: The step to run.
  /// - Returns: The step's record: how it ended and how long it took. A pending step removed by
  ///   ``cancelAll()`` ends as ``LaunchOutcome/cancelled`` with a zero duration (it is not in
  ///   ``history``, as it never started). `nil` only if the waiting task was cancelled first:
  ///   the step itself is not cancelled by that, and runs in its turn.
  @discardableResult
  public func enqueueAndWait(_ step: any LaunchStep) async -> LaunchRecord? {
    let token = admit(step) ?? tokenOfDuplicate(of: step)
    guard let token else { return nil }
    lastWaiter += 1
    let waiter = lastWaiter
    return await withTaskCancellationHandler {
      // resumed by: the step's end (stepEnded, or cancelAll for a pending step), or the
      // cancellation handler below.
      await withCheckedContinuation { continuation in
        if Task.isCancelled {
          continuation.resume(returning: nil)
        } else {
          stepWaiters[token, default: [:]][waiter] = continuation
        }
      }
    } onCancel: {
      Task { @MainActor [weak self] in self?.cancelStepWaiter(waiter, of: token) }
    }
  }

  /// Queues `step` unless it is a duplicate; returns its token, or `nil` if it was not queued.
  private func admit(_ step: any LaunchStep) -> UInt64? {
    if deduplication == .pendingOrRunning, tokenOfDuplicate(of: step) != nil {
      emit(.deduplicated(name: step.name))
      return nil
    }
    lastToken += 1
    let token = lastToken
    pendingSteps.append(step)
    pendingTokens.append(token)
    emit(.enqueued(name: step.name))
    let (sleep, gracePeriod, sequencer) = (sleep, gracePeriod, WeakSequencer(self))
    let job = line.enqueue(name: step.name) { () async -> Void in
      await Self.runJob(
        of: step,
        token: token,
        in: sequencer,
        sleep: sleep,
        gracePeriod: gracePeriod
      )
    }
    jobs[token] = job
    // Given the slot at once (nothing runs, not suspended): it is the current step from now on.
    if job.startedAtAdmission { take(token) }
    return token
  }

  /// The token of the pending or running step with `step`'s id.
  private func tokenOfDuplicate(of step: any LaunchStep) -> UInt64? {
    if let current = currentStep, current.id == step.id { return currentToken }
    return pendingSteps.firstIndex { $0.id == step.id }.map { pendingTokens[$0] }
  }

  private func cancelStepWaiter(_ waiter: UInt64, of token: UInt64) {
    stepWaiters[token]?.removeValue(forKey: waiter)?.resume(returning: nil)
    if stepWaiters[token]?.isEmpty == true { stepWaiters[token] = nil }
  }

  private func resolveStepWaiters(of token: UInt64, with record: LaunchRecord) {
    guard let waiters = stepWaiters.removeValue(forKey: token) else { return }
    for waiter in waiters.values { waiter.resume(returning: record) }
  }

  /// Cancels the running step and removes every pending one.
  ///
  /// Pending steps leave the line at once (a ``LaunchEvent/removed(name:)`` event each). The
  /// running step's task is cancelled; it stays the ``currentStep`` until its `run()` returns,
  /// and is then recorded as cancelled: the sequencer is idle from that moment, not before, so
  /// a step enqueued meanwhile starts only after the cancelled one has left the screen.
  public func cancelAll() {
    let removed = Array(zip(pendingSteps, pendingTokens))
    pendingSteps = []
    pendingTokens = []
    for (step, token) in removed {
      // Out of the engine's line at once; a job already given its turn finds its step gone.
      jobs.removeValue(forKey: token)?.cancel()
      resumeWaiters.removeValue(forKey: token)?.resume()
      emit(.removed(name: step.name))
      resolveStepWaiters(
        of: token,
        with: LaunchRecord(name: step.name, id: step.id, outcome: .cancelled, duration: .zero)
      )
    }
    if let token = currentToken, let step = currentStep, graceWatch == nil {
      jobs[token]?.cancel()
      // One run() at a time: the step stays on screen until its run() returns (its job holds
      // the engine's slot until then); if that takes longer than the grace period, say so.
      let (sleep, gracePeriod) = (sleep, gracePeriod)
      graceWatch = Task { [weak self] in
        do {
          try await sleep(gracePeriod)
          self?.overran(step, token: token)
        } catch {
          // Cancelled: the step returned within the grace period.
        }
      }
    }
    resumeIdleWaitersIfIdle()
  }

  /// Lets the running step finish but starts no new step until ``resume()``.
  ///
  /// For example while a system alert is up. Steps may still be enqueued.
  public func suspend() {
    guard !isSuspended else { return }
    isSuspended = true
    line.setLimit(0)
    emit(.suspended)
  }

  /// Starts steps again after ``suspend()``.
  public func resume() {
    guard isSuspended else { return }
    isSuspended = false
    emit(.resumed)
    line.setLimit(1)
    // The engine gave the slot back to the first pending step (now, or earlier if its job had
    // its turn when the sequencer was suspended): it is the current step from now on.
    if let token = pendingTokens.first, jobs[token]?.hasTurn == true { take(token) }
    let waiters = resumeWaiters
    resumeWaiters = [:]
    for waiter in waiters.values { waiter.resume() }
  }

  /// Returns when no step is running or waiting, or when the waiting task is cancelled.
  ///
  /// While the sequencer is suspended with steps pending, this waits until it is resumed and
  /// they have run (or `cancelAll()` removes them). A step cancelled by ``cancelAll()`` counts
  /// as running until its `run()` returns.
  ///
  /// If the calling task is cancelled, this returns at once without waiting for idleness
  /// (check `Task.isCancelled`, or ``isIdle``); the steps are not cancelled by that.
  public func waitUntilIdle() async {
    if isIdle { return }
    lastWaiter += 1
    let waiter = lastWaiter
    await withTaskCancellationHandler {
      // resumed by: resumeIdleWaitersIfIdle, or the cancellation handler below.
      await withCheckedContinuation { continuation in
        if Task.isCancelled {
          continuation.resume()
        } else {
          idleWaiters[waiter] = continuation
        }
      }
    } onCancel: {
      Task { @MainActor [weak self] in self?.idleWaiters.removeValue(forKey: waiter)?.resume() }
    }
  }

  /// Everything that happens from now on, in order; ends when the sequencer is freed.
  ///
  /// Each read starts an independent listener. A listener buffers at most 1,000 events it has
  /// not read; past that, the oldest unread events are dropped.
  public var events: AsyncStream<LaunchEvent> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: LaunchEvent.self,
      bufferingPolicy: .bufferingNewest(1_000)
    )
    lastListener += 1
    listeners[lastListener] = continuation
    return stream
  }

  isolated deinit {
    for listener in listeners.values { listener.finish() }
    for job in jobs.values { job.cancel() }
    for waiter in idleWaiters.values { waiter.resume() }
    for waiter in resumeWaiters.values { waiter.resume() }
    for waiters in stepWaiters.values {
      for waiter in waiters.values { waiter.resume(returning: nil) }
    }
  }

  // MARK: - Running steps

  @ObservationIgnored private var startedAt: Duration = .zero

  /// Takes the pending step of `token` from the line: the engine has given its job the slot.
  private func take(_ token: UInt64) {
    guard currentToken == nil, pendingTokens.first == token else { return }
    let step = pendingSteps.removeFirst()
    pendingTokens.removeFirst()
    currentToken = token
    currentStep = step
    currentOverran = false
    startedAt = now()
    emit(.started(name: step.name))
  }

  /// The engine's job of a step, run when it has the slot.
  ///
  /// Takes the step (unless ``cancelAll()`` removed it), runs it, and records how it ended. The
  /// slot is the engine's: the next step's job starts only when this one has returned. Static,
  /// with the sequencer held weakly: a running step does not keep a released sequencer alive
  /// (its `deinit` cancels the step).
  private static func runJob(
    of step: any LaunchStep,
    token: UInt64,
    in sequencer: WeakSequencer,
    sleep: @escaping @Sendable (Duration) async throws -> Void,
    gracePeriod: Duration
  ) async {
    if sequencer.value?.currentToken != token {
      if let waiting = sequencer.value, waiting.isSuspended,
        waiting.pendingTokens.contains(token)
      {
        // Given the slot just before suspend(): the step waits, holding it, until resume() (or
        // until the sequencer is freed: its deinit resumes it).
        await withCheckedContinuation { continuation in
          if let waiting = sequencer.value {
            waiting.resumeWaiters[token] = continuation
          } else {
            continuation.resume()
          }
        }
      }
      guard let taking = sequencer.value else { return }
      taking.take(token)
      guard taking.currentToken == token else {
        taking.jobs[token] = nil  // removed by cancelAll() before it started
        return
      }
    }
    let outcome = await perform(step, sleep: sleep, gracePeriod: gracePeriod) {
      sequencer.value?.overran(step, token: token)
    }
    sequencer.value?.stepEnded(step, outcome: outcome, token: token)
  }

  /// Asks the step whether to run, then runs it, racing its timeout; a step cancelled or timed
  /// out is waited for until its `run()` returns (`overran` is called if that takes longer than
  /// the grace period).
  private static func perform(
    _ step: any LaunchStep,
    sleep: (@Sendable (Duration) async throws -> Void)?,
    gracePeriod: Duration,
    overran: @escaping @MainActor () -> Void
  ) async -> LaunchOutcome {
    guard await step.shouldRun() else {
      return Task.isCancelled ? .cancelled : .skipped
    }
    if Task.isCancelled { return .cancelled }
    // No timeout: the step runs in this task, which `cancelAll()` cancels (and watches for the
    // grace period); no race and no task of its own.
    guard let timeout = step.timeout, let sleep else {
      await step.run()
      return Task.isCancelled ? .cancelled : .completed
    }
    let race = FirstOutcome()
    let work = Task { @MainActor in
      await step.run()
      // Cancelled by the sequencer (cancelAll): it ended because it was cancelled. A timeout
      // settles first, below, before it cancels the work.
      race.settle(Task.isCancelled ? .cancelled : .completed)
    }
    let timer = Task { @MainActor in
      do {
        try await sleep(timeout)
        race.settle(.timedOut)
        work.cancel()
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
    guard outcome != .completed else { return outcome }
    // One run() at a time: the step, timed out or cancelled, is still on screen until its
    // run() returns. (Cancelled by `cancelAll()`, the sequencer watches the grace period.)
    let watch: Task<Void, Never>? =
      outcome == .timedOut
      ? Task { @MainActor in
        do {
          try await sleep(gracePeriod)
          overran()
        } catch {
          // Cancelled: the step returned within the grace period.
        }
      } : nil
    await work.value
    watch?.cancel()
    return outcome
  }

  /// The cancelled step has not returned within the grace period: said, once.
  private func overran(_ step: any LaunchStep, token: UInt64) {
    guard currentToken == token, !currentOverran else { return }
    currentOverran = true
    emit(.stillRunning(name: step.name, after: gracePeriod))
  }

  private func stepEnded(_ step: any LaunchStep, outcome: LaunchOutcome, token: UInt64) {
    guard currentToken == token else { return }
    jobs[token] = nil
    graceWatch?.cancel()
    graceWatch = nil
    currentStep = nil
    currentToken = nil
    let record = record(step, outcome, startedAt: startedAt, overran: currentOverran)
    resolveStepWaiters(of: token, with: record)
    resumeIdleWaitersIfIdle()
  }

  @discardableResult
  private func record(
    _ step: any LaunchStep,
    _ outcome: LaunchOutcome,
    startedAt: Duration,
    overran: Bool = false
  ) -> LaunchRecord {
    let record = LaunchRecord(
      name: step.name,
      id: step.id,
      outcome: outcome,
      duration: now() - startedAt,
      overranGracePeriod: overran
    )
    history.append(record)
    if history.count > historyLimit { history.removeFirst(history.count - historyLimit) }
    emit(.ended(record))
    return record
  }

  private func resumeIdleWaitersIfIdle() {
    guard isIdle, !idleWaiters.isEmpty else { return }
    let waiters = idleWaiters
    idleWaiters = [:]
    for waiter in waiters.values { waiter.resume() }
  }

  private func emit(_ event: LaunchEvent) {
    for (token, listener) in listeners {
      if case .terminated = listener.yield(event) { listeners[token] = nil }
    }
  }
}

/// A sequencer held weakly by its steps' jobs, on the main actor.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
private final class WeakSequencer {
  weak var value: LaunchSequencer?

  init(_ value: LaunchSequencer) {
    self.value = value
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
