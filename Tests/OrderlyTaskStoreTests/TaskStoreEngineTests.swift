import OrderlyTaskStore
import OrderlyTestSupport
import Testing

/// A store's keys are lines of `OrderlyCore`'s engine, and each policy an admission rule on its
/// key's line: the rules below are the engine's, not a second line of the store's own.
@Suite(
  "TaskStore on the core engine: a key's tasks start in the order they were added",
  .timeLimit(.minutes(1))
)
@MainActor
struct TaskStoreEngineTests {
  let log = OrderedRecorder<String>()
  let store = TaskStore<String>()

  @Test("a task that may run beside others still starts after the tasks already waiting")
  func startsInOrderAcrossPolicies() async throws {
    let a = Probe("a", log: log)
    let b = Probe("b", log: log)
    let c = Probe("c", log: log)
    let first = store.addTask(forKey: "k", policy: .enqueue) { try await a.run() }
    let second = store.addTask(forKey: "k", policy: .enqueue) { try await b.run() }
    // No limit of its own, but b waits ahead of it: it waits too, then runs beside b.
    let third = store.addTask(forKey: "k", policy: .concurrent(limit: nil)) { try await c.run() }
    try await a.started.wait()
    let waitingBehindB = store.queuedCount(forKey: "k")
    #expect(waitingBehindB == 2)
    #expect(!c.started.isOpen)
    a.gate.open()
    _ = try await first.value
    try await b.started.wait()
    try await c.started.wait()
    let besideEachOther = store.runningCount(forKey: "k")
    #expect(besideEachOther == 2)
    for probe in [b, c] { probe.gate.open() }
    _ = try await (second.value, third.value)
    #expect(log.values.prefix(3) == ["a started", "a ended", "b started"])
  }

  @Test("an .enqueue task that runs holds back no later task allowed to run beside it")
  func enqueueDoesNotHoldLaterOnesBack() async throws {
    let a = Probe("a", log: log)
    let b = Probe("b", log: log)
    let first = store.addTask(forKey: "k", policy: .enqueue) { try await a.run() }
    try await a.started.wait()
    let beside = store.addTask(forKey: "k", policy: .concurrent(limit: 2)) { try await b.run() }
    try await b.started.wait()
    let running = store.runningCount(forKey: "k")
    #expect(running == 2)
    for probe in [a, b] { probe.gate.open() }
    _ = try await (first.value, beside.value)
  }

  @Test("a task given its turn at once but cancelled before its work began ends once, as cancelled")
  func cancelledBeforeItsWorkBegan() async throws {
    let events = store.events()
    let handle = store.addTask(forKey: "k", policy: .enqueue) { "never" }
    #expect(store.isRunning(forKey: "k"))
    handle.cancel()
    await #expect(throws: CancellationError.self) { try await handle.value }
    #expect(!store.isRunning(forKey: "k"))
    let state = store.state(forKey: "k")
    #expect(state.lastOutcome == .cancelled)
    var read: [String] = []
    for await event in events {
      read.append(event.description)
      if read.count == 2 { break }
    }
    #expect(read == ["started k #1", "ended k #1: cancelled"])
  }
}

@Suite("TaskStoreTask speaks as QueuedTask does", .timeLimit(.minutes(1)))
@MainActor
struct TaskStoreHandleTests {
  @Test("result holds the value, or the error value would throw")
  func result() async throws {
    let store = TaskStore<String>()
    let done = await store.addTask(forKey: "a") { 7 }.result
    #expect((try? done.get()) == 7)
    store.addTask(forKey: "b", policy: .dropNew) { try await Task.sleep(for: .seconds(60)) }
    let dropped = await store.addTask(forKey: "b", policy: .dropNew) {}.result
    let droppedError = dropped.failure as? TaskStoreError
    #expect(droppedError == .dropped(key: "b", policy: .dropNew))
    store.cancelAll()
  }
}

extension Result {
  fileprivate var failure: Failure? {
    if case .failure(let error) = self { error } else { nil }
  }
}
