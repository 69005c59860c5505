import Observation
import OrderlyLaunch
import OrderlyTestSupport
import Testing

/// A step that records its start and end and waits for its own signal.
@MainActor
final class RecordingStep: LaunchStep {
  let name: String
  let id: String
  let timeout: Duration?
  let release = LaunchSignal<Void>()
  let log: OrderedRecorder<String>
  var runIf: @MainActor () -> Bool = { true }
  private(set) var sawCancellation = false

  init(_ name: String, id: String? = nil, timeout: Duration? = nil, log: OrderedRecorder<String>) {
    self.name = name
    self.id = id ?? name
    self.timeout = timeout
    self.log = log
  }

  func shouldRun() async -> Bool { runIf() }

  func run() async {
    log.record("\(name) started")
    do {
      try await release.wait()
      log.record("\(name) ended")
    } catch {
      sawCancellation = true
      log.record("\(name) cancelled")
    }
  }
}

@MainActor
private func settle(_ sequencer: LaunchSequencer, until condition: () -> Bool) async {
  while !condition() { await Task.yield() }
}

@Suite("LaunchSequencer", .timeLimit(.minutes(1)))
@MainActor
struct LaunchSequencerTests {
  let log = OrderedRecorder<String>()

  @Test("history keeps the newest historyLimit records; an unread events listener the newest 1,000")
  func boundedHistoryAndEvents() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock(), deduplication: .none, historyLimit: 3)
    let events = sequencer.events
    for index in 0..<1_005 {
      let step = RecordingStep("step \(index)", log: log)
      step.release.fire()
      _ = await sequencer.enqueueAndWait(step)
    }
    let kept = sequencer.history.map(\.name)
    #expect(kept == ["step 1002", "step 1003", "step 1004"])
    // Each step made three events (enqueued, started, ended): 3,015 in all. The listener kept
    // the last 1,000, so its 1,000th is the last step's end.
    var iterator = events.makeAsyncIterator()
    var read: [LaunchEvent] = []
    for _ in 0..<1_000 { if let event = await iterator.next() { read.append(event) } }
    #expect(read.last?.description == "ended step 1004: completed")
  }

  @Test("steps run one at a time, in enqueue order")
  func order() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let steps = ["nudge", "passcode", "launch screen"].map { RecordingStep($0, log: log) }
    for step in steps { sequencer.enqueue(step) }
    #expect(sequencer.currentStep?.name == "nudge")
    #expect(sequencer.pendingSteps.map(\.name) == ["passcode", "launch screen"])
    for step in steps {
      try await log.waitForCount(log.count + 1)
      step.release.fire()
    }
    await sequencer.waitUntilIdle()
    #expect(
      log.values == [
        "nudge started", "nudge ended", "passcode started", "passcode ended",
        "launch screen started", "launch screen ended",
      ]
    )
    #expect(
      sequencer.history.map(\.description) == [
        "nudge: completed", "passcode: completed", "launch screen: completed",
      ]
    )
  }

  @Test("a step already pending or running is not queued twice; after it ends it may be")
  func deduplication() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let passcode = RecordingStep("passcode", log: log)
    #expect(sequencer.enqueue(passcode))
    #expect(sequencer.enqueue(RecordingStep("whats new", log: log)))
    #expect(!sequencer.enqueue(RecordingStep("passcode", log: log)))  // running
    #expect(!sequencer.enqueue(RecordingStep("whats new", log: log)))  // pending
    #expect(sequencer.pendingSteps.count == 1)
    try await log.waitForCount(1)
    passcode.release.fire()
    await settle(sequencer) { sequencer.currentStep?.name == "whats new" }
    #expect(sequencer.enqueue(RecordingStep("passcode", log: log)))  // ended: queued anew
    let everything = LaunchSequencer(clock: ManualClock(), deduplication: .none)
    everything.enqueue(RecordingStep("a", log: log))
    #expect(everything.enqueue(RecordingStep("a", log: log)))
    everything.cancelAll()
    sequencer.cancelAll()
  }

  @Test("shouldRun is asked just before the step would start, and skips it")
  func shouldRunAtStart() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let first = RecordingStep("first", log: log)
    let deepLink = RecordingStep("deep link", log: log)
    let pendingLink = PendingDeepLink()
    deepLink.runIf = { pendingLink.exists }
    sequencer.enqueue(first)
    sequencer.enqueue(deepLink)
    try await log.waitForCount(1)
    pendingLink.exists = false  // changes after enqueue, before the step starts
    first.release.fire()
    await sequencer.waitUntilIdle()
    #expect(sequencer.history.map(\.outcome) == [.completed, .skipped])
    #expect(!log.values.contains("deep link started"))
  }

  @Test("a step that overruns its timeout is cancelled and the next one starts")
  func timeout() async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock)
    let slow = RecordingStep("slow", timeout: .seconds(5), log: log)
    let next = RecordingStep("next", log: log)
    sequencer.enqueue(slow)
    sequencer.enqueue(next)
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(4))
    #expect(sequencer.currentStep?.name == "slow")
    clock.advance(by: .seconds(1))
    await settle(sequencer) { sequencer.currentStep?.name == "next" }
    #expect(sequencer.history[0].outcome == .timedOut)
    #expect(sequencer.history[0].duration == .seconds(5))
    try await log.waitForCount(3)
    #expect(slow.sawCancellation)
    next.release.fire()
    await sequencer.waitUntilIdle()
  }

  @Test("a step that ends within its timeout completes; its timer is dropped")
  func withinTimeout() async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock)
    let quick = RecordingStep("quick", timeout: .seconds(5), log: log)
    sequencer.enqueue(quick)
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(2))
    quick.release.fire()
    await sequencer.waitUntilIdle()
    #expect(sequencer.history.map(\.outcome) == [.completed])
    #expect(sequencer.history[0].duration == .seconds(2))
    while clock.sleeperCount > 0 { await Task.yield() }
  }

  @Test(
    "cancelAll, at every point: pending steps leave at once; the running one is cancelled and ends when its run() returns",
    arguments: ["while asking shouldRun", "while running", "during a timeout", "nothing running"]
  )
  func cancelAll(point: String) async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock)
    let gate = LaunchSignal<Void>()
    let step = RecordingStep(
      "step",
      timeout: point == "during a timeout" ? .seconds(9) : nil,
      log: log
    )
    if point == "while asking shouldRun" {
      let asking = AskingStep(answer: gate)
      sequencer.enqueue(asking)
      await settle(sequencer) { asking.asked }
    } else if point != "nothing running" {
      sequencer.enqueue(step)
      try await log.waitForCount(1)
    } else {
      sequencer.suspend()
    }
    sequencer.enqueue(RecordingStep("pending", log: log))
    let events = sequencer.events
    sequencer.cancelAll()
    #expect(sequencer.pendingSteps.isEmpty)
    var iterator = events.makeAsyncIterator()
    #expect(await iterator.next() == .removed(name: "pending"))
    if point == "nothing running" {
      #expect(sequencer.isIdle && sequencer.currentStep == nil)
      #expect(sequencer.history.isEmpty)
      sequencer.resume()
    } else {
      // A step enqueued now waits for the cancelled one to leave.
      let newer = RecordingStep("newer", log: log)
      sequencer.enqueue(newer)
      await settle(sequencer) { sequencer.currentStep?.name == "newer" }
      #expect(sequencer.history.last?.outcome == .cancelled)
      if point == "while running" || point == "during a timeout" {
        #expect(step.sawCancellation)
        try await log.waitForCount(3)
        #expect(log.values == ["step started", "step cancelled", "newer started"])
      }
      gate.fire()
      await Task.yield()
      #expect(sequencer.currentStep?.name == "newer")
      newer.release.fire()
      await sequencer.waitUntilIdle()
      #expect(sequencer.history.last?.description == "newer: completed")
    }
  }

  @Test("suspend lets the running step finish but starts nothing until resume")
  func suspendAndResume() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let first = RecordingStep("first", log: log)
    let second = RecordingStep("second", log: log)
    sequencer.enqueue(first)
    sequencer.enqueue(second)
    try await log.waitForCount(1)
    sequencer.suspend()
    #expect(sequencer.isSuspended)
    first.release.fire()
    await settle(sequencer) { sequencer.currentStep == nil }
    #expect(sequencer.pendingSteps.map(\.name) == ["second"] && !sequencer.isIdle)
    let waiter = Task { await sequencer.waitUntilIdle() }
    sequencer.resume()
    #expect(sequencer.currentStep?.name == "second")
    second.release.fire()
    await waiter.value
    #expect(log.values == ["first started", "first ended", "second started", "second ended"])
  }

  @Test("durations are measured on the injected clock")
  func durations() async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock)
    let step = RecordingStep("step", log: log)
    sequencer.enqueue(step)
    try await log.waitForCount(1)
    clock.advance(by: .seconds(3))
    step.release.fire()
    await sequencer.waitUntilIdle()
    #expect(
      sequencer.history == [
        LaunchRecord(name: "step", id: "step", outcome: .completed, duration: .seconds(3))
      ]
    )
  }

  @Test("state is observable: a view reading isIdle and currentStep is told of changes")
  func observation() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let changed = LaunchSignal<Void>()
    withObservationTracking {
      _ = sequencer.isIdle
      _ = sequencer.currentStep
    } onChange: {
      changed.fire()
    }
    let step = RecordingStep("step", log: log)
    sequencer.enqueue(step)
    try await changed.wait()
    step.release.fire()
    await sequencer.waitUntilIdle()
  }

  @Test("events report every change in order")
  func events() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let events = sequencer.events
    let step = RecordingStep("a", log: log)
    sequencer.enqueue(step)
    sequencer.enqueue(RecordingStep("a", log: log))
    sequencer.suspend()
    sequencer.resume()
    step.release.fire()
    await sequencer.waitUntilIdle()
    var seen: [String] = []
    for await event in events {
      seen.append(event.description)
      if seen.count == 6 { break }
    }
    #expect(
      seen == [
        "enqueued a", "started a", "deduplicated a", "suspended", "resumed", "ended a: completed",
      ]
    )
  }
}

/// A step whose `shouldRun()` waits for a signal.
@MainActor
final class AskingStep: LaunchStep {
  let answer: LaunchSignal<Void>
  private(set) var asked = false
  init(answer: LaunchSignal<Void>) { self.answer = answer }

  func shouldRun() async -> Bool {
    asked = true
    return (try? await answer.wait()) != nil
  }

  func run() async {}
}

/// App state a step reads when it is about to start.
@MainActor
final class PendingDeepLink {
  var exists = true
}

/// A step whose `run()` keeps its modal up after cancellation until the test lets it go, as a
/// dismissal animation would.
@MainActor
final class StubbornStep: LaunchStep {
  let name: String
  let timeout: Duration?
  let letGo = Gate()
  let log: OrderedRecorder<String>

  init(_ name: String, timeout: Duration? = nil, log: OrderedRecorder<String>) {
    self.name = name
    self.timeout = timeout
    self.log = log
  }

  func run() async {
    log.record("\(name) started")
    // Not cancellable: a detached task does not inherit the step's cancellation.
    await Task.detached { [letGo] in try? await letGo.wait() }.value
    log.record("\(name) returned")
  }
}

@Suite("LaunchSequencer: one run() at a time", .timeLimit(.minutes(1)))
@MainActor
struct LaunchSequencerOneAtATimeTests {
  let log = OrderedRecorder<String>()

  @Test(
    "a timed-out step still running holds the line until run() returns, and is reported after the grace period"
  )
  func timedOutStepHoldsTheLine() async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock, gracePeriod: .seconds(1))
    let events = sequencer.events
    let slow = StubbornStep("slow", timeout: .seconds(5), log: log)
    let next = RecordingStep("next", log: log)
    sequencer.enqueue(slow)
    sequencer.enqueue(next)
    try await clock.waitForSleepers(1)  // the timeout
    clock.advance(by: .seconds(5))
    try await clock.waitForSleepers(1)  // the grace period, while run() has not returned
    #expect(sequencer.currentStep?.name == "slow")
    #expect(log.values == ["slow started"])
    clock.advance(by: .seconds(1))
    var report: LaunchEvent?
    for await event in events {
      if case .stillRunning = event {
        report = event
        break
      }
    }
    #expect(report == .stillRunning(name: "slow", after: .seconds(1)))
    #expect(sequencer.currentStep?.name == "slow")
    slow.letGo.open()
    await settle(sequencer) { sequencer.currentStep?.name == "next" }
    try await log.waitForCount(3)
    #expect(log.values == ["slow started", "slow returned", "next started"])
    #expect(
      sequencer.history == [
        LaunchRecord(
          name: "slow",
          id: "slow",
          outcome: .timedOut,
          duration: .seconds(6),
          overranGracePeriod: true
        )
      ]
    )
    next.release.fire()
    await sequencer.waitUntilIdle()
  }

  @Test("after cancelAll, a step enqueued next starts only when the cancelled run() has returned")
  func cancelAllThenEnqueue() async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock)
    let modal = StubbornStep("modal", log: log)
    sequencer.enqueue(modal)
    try await log.waitForCount(1)
    sequencer.cancelAll()
    #expect(!sequencer.isIdle)
    let following = RecordingStep("following", log: log)
    sequencer.enqueue(following)
    for _ in 0..<20 { await Task.yield() }
    #expect(sequencer.currentStep?.name == "modal")
    #expect(log.values == ["modal started"])
    modal.letGo.open()
    await settle(sequencer) { sequencer.currentStep?.name == "following" }
    try await log.waitForCount(3)
    #expect(log.values == ["modal started", "modal returned", "following started"])
    #expect(sequencer.history.map(\.description) == ["modal: cancelled"])
    following.release.fire()
    await sequencer.waitUntilIdle()
  }

  @Test(
    "enqueueAndWait returns the step's own record; a duplicate's caller gets the running step's"
  )
  func awaitOneStep() async throws {
    let clock = ManualClock()
    let sequencer = LaunchSequencer(clock: clock)
    let passcode = RecordingStep("passcode", log: log)
    let mine = Task { await sequencer.enqueueAndWait(passcode) }
    try await log.waitForCount(1)
    let duplicate = Task { await sequencer.enqueueAndWait(RecordingStep("passcode", log: log)) }
    let removed = Task { await sequencer.enqueueAndWait(RecordingStep("later", log: log)) }
    await settle(sequencer) { sequencer.pendingSteps.count == 1 }
    clock.advance(by: .seconds(2))
    passcode.release.fire()
    let record = await mine.value
    let duplicateRecord = await duplicate.value
    #expect(
      record
        == LaunchRecord(
          name: "passcode",
          id: "passcode",
          outcome: .completed,
          duration: .seconds(2)
        )
    )
    #expect(duplicateRecord == record)
    sequencer.cancelAll()
    let removedRecord = await removed.value
    #expect(removedRecord?.outcome == .cancelled)
    await sequencer.waitUntilIdle()
  }

  @Test("a pending step removed by cancelAll ends its enqueueAndWait caller as cancelled")
  func removedStepEndsItsWaiter() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let first = RecordingStep("first", log: log)
    sequencer.enqueue(first)
    try await log.waitForCount(1)
    let waiting = Task { await sequencer.enqueueAndWait(RecordingStep("second", log: log)) }
    await settle(sequencer) { sequencer.pendingSteps.count == 1 }
    sequencer.cancelAll()
    let record = await waiting.value
    #expect(
      record == LaunchRecord(name: "second", id: "second", outcome: .cancelled, duration: .zero)
    )
    await sequencer.waitUntilIdle()
  }

  @Test("waitUntilIdle and enqueueAndWait end when their task is cancelled; the step goes on")
  func waitsEndOnCancellation() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let step = RecordingStep("step", log: log)
    sequencer.enqueue(step)
    try await log.waitForCount(1)
    let idle = Task { () -> Bool in
      await sequencer.waitUntilIdle()
      return sequencer.isIdle
    }
    let one = Task { await sequencer.enqueueAndWait(RecordingStep("step", log: log)) }
    idle.cancel()
    one.cancel()
    let wasIdle = await idle.value
    let record = await one.value
    #expect(!wasIdle)
    #expect(record == nil)
    #expect(sequencer.currentStep?.name == "step")
    step.release.fire()
    await sequencer.waitUntilIdle()
    #expect(sequencer.history.map(\.description) == ["step: completed"])
  }
}
