import Observation
import OrderlyTaskStore
import OrderlyTestSupport
import Testing

/// A model that owns a store, as the documentation shows one, with a task that runs until it is
/// cancelled.
@MainActor final class PollingModel {
  let tasks = TaskStore<String>()
  let ended: Gate

  init(ended: Gate) {
    self.ended = ended
  }

  func startPolling(started: Gate) {
    tasks.addTask(forKey: "poll") { [weak self, ended] in
      defer { ended.open() }
      started.open()
      while !Task.isCancelled {
        try await Gate().wait()  // until cancelled
      }
      self?.lastPoll = "never reached"
    }
  }

  var lastPoll = ""
}

@Suite("TaskStore: observation by key, bounded memory, a released model", .timeLimit(.minutes(1)))
@MainActor
struct TaskStoreMemoryTests {
  @Test("a reader of one key is not invalidated by another key's changes, only by its own")
  func observationByKey() async throws {
    let store = TaskStore<String>()
    let changes = OrderedRecorder<String>()
    withObservationTracking {
      _ = store.isRunning(forKey: "a")
      _ = store.state(forKey: "a")
    } onChange: {
      changes.record("a changed")
    }
    // Another key starts, waits, ends.
    let gate = Gate()
    let b1 = store.addTask(forKey: "b") { try await gate.wait() }
    let b2 = store.addTask(forKey: "b", policy: .enqueue) {}
    gate.open()
    try await b1.value
    try await b2.value
    let afterOtherKey = changes.values
    #expect(afterOtherKey.isEmpty)
    // Its own key changes: the reader is told.
    let a = store.addTask(forKey: "a") {}
    try await changes.waitForCount(1)
    try await a.value
  }

  @Test("idle keys keep their state up to idleKeyLimit; older idle keys are forgotten")
  func idleKeysBounded() async throws {
    let store = TaskStore<Int>(idleKeyLimit: 2)
    for key in 1...5 {
      try await store.addTask(forKey: key) {}.value
      // The store forgets the line when the task's end reaches it.
      while store.runningCount(forKey: key) > 0 { await Task.yield() }
    }
    let counts = (1...5).map { store.state(forKey: $0).performedCount }
    #expect(counts == [0, 0, 0, 1, 1])
    let forgotten = store.state(forKey: 1)
    #expect(forgotten.lastOutcome == nil)
    let kept = store.state(forKey: 5)
    #expect(kept.lastOutcome == .succeeded)
  }

  @Test("a key busy again is not forgotten while it runs")
  func busyKeyKept() async throws {
    let store = TaskStore<Int>(idleKeyLimit: 1)
    try await store.addTask(forKey: 1) {}.value
    while store.runningCount(forKey: 1) > 0 { await Task.yield() }
    let gate = Gate()
    let running = store.addTask(forKey: 1) { try await gate.wait() }
    for key in 2...4 {
      try await store.addTask(forKey: key) {}.value
      while store.runningCount(forKey: key) > 0 { await Task.yield() }
    }
    let whileRunning = store.state(forKey: 1).performedCount
    #expect(whileRunning == 2)
    gate.open()
    try await running.value
  }

  @Test("an events listener that does not read keeps only the newest events it asked for")
  func eventsBounded() async throws {
    let store = TaskStore<String>()
    let events = store.events(bufferingNewest: 2)
    for index in 0..<3 { try await store.addTask(forKey: "k\(index)") {}.value }
    // Each task made a started and an ended event: six in all, the last two kept.
    var iterator = events.makeAsyncIterator()
    let kept = [await iterator.next(), await iterator.next()].compactMap { $0 }
    #expect(kept.map(\.description) == ["started k2 #3", "ended k2 #3: succeeded"])
  }

  @Test("a model released while its task runs is freed, and its store cancels the task")
  func releasedModelCancelsItsTask() async throws {
    let started = Gate()
    let ended = Gate()
    var model: PollingModel? = PollingModel(ended: ended)
    model?.startPolling(started: started)
    try await started.wait()
    model = nil
    try await ended.wait()
    #expect(model == nil)
  }
}
