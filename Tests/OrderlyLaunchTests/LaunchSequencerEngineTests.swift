import OrderlyLaunch
import OrderlyTestSupport
import Testing

/// The sequencer's line is a line of `OrderlyCore`'s engine with one slot: a step's job holds it
/// until its `run()` returns, and `suspend()` takes the slot away.
@Suite("LaunchSequencer on the core engine", .timeLimit(.minutes(1)))
@MainActor
struct LaunchSequencerEngineTests {
  let log = OrderedRecorder<String>()

  @Test("suspend() called as a step returns holds the next step until resume()")
  func suspendAsAStepReturns() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let first = SuspendingStep(sequencer: sequencer, log: log)
    let second = RecordingStep("second", log: log)
    let events = sequencer.events
    sequencer.enqueue(first)
    sequencer.enqueue(second)
    // The first step's run() asks for suspend() on its way out: the main actor runs that before
    // the second step's job, which the engine gives the slot once the first one's job returns.
    try await log.waitForCount(2)
    await settle { sequencer.isSuspended && sequencer.history.count == 1 }
    for _ in 0..<50 { await Task.yield() }
    let pending = sequencer.pendingSteps.map(\.name)
    #expect(pending == ["second"])
    #expect(sequencer.currentStep == nil)
    #expect(log.values == ["first started", "first returned"])
    sequencer.resume()
    #expect(sequencer.currentStep?.name == "second")
    second.release.fire()
    await sequencer.waitUntilIdle()
    var order: [String] = []
    for await event in events where !event.description.hasPrefix("enqueued") {
      order.append(event.description)
      if order.count == 6 { break }
    }
    #expect(
      order == [
        "started first", "ended first: completed", "suspended", "resumed", "started second",
        "ended second: completed",
      ]
    )
  }

  @Test("a running step does not keep a released sequencer alive: its deinit cancels the step")
  func releasedSequencerCancelsItsStep() async throws {
    let step = RecordingStep("modal", log: log)
    weak var released: LaunchSequencer?
    do {
      let sequencer = LaunchSequencer(clock: ManualClock())
      released = sequencer
      sequencer.enqueue(step)
      try await log.waitForCount(1)
    }
    try await log.waitForCount(2)
    #expect(log.values == ["modal started", "modal cancelled"])
    #expect(released == nil)
  }

  @Test("a step enqueued while another runs starts the moment the engine gives it the slot")
  func nextStepTakesTheSlot() async throws {
    let sequencer = LaunchSequencer(clock: ManualClock())
    let steps = (1...3).map { RecordingStep("step \($0)", log: log) }
    for step in steps { sequencer.enqueue(step) }
    for (index, step) in steps.enumerated() {
      try await log.waitForCount(2 * index + 1)
      let current = sequencer.currentStep?.name
      #expect(current == step.name)
      step.release.fire()
    }
    await sequencer.waitUntilIdle()
    let history = sequencer.history.map(\.description)
    #expect(history == ["step 1: completed", "step 2: completed", "step 3: completed"])
  }
}

/// A step whose `run()` asks the main actor to suspend the sequencer as it returns.
@MainActor
final class SuspendingStep: LaunchStep {
  let id = "first"
  let name = "first"
  weak var sequencer: LaunchSequencer?
  let log: OrderedRecorder<String>

  init(sequencer: LaunchSequencer, log: OrderedRecorder<String>) {
    self.sequencer = sequencer
    self.log = log
  }

  func run() async {
    log.record("first started")
    await Task.yield()
    Task { @MainActor [weak sequencer] in sequencer?.suspend() }
    log.record("first returned")
  }
}

@MainActor
private func settle(until condition: () -> Bool) async {
  while !condition() { await Task.yield() }
}
