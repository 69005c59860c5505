import OrderlyCore
import OrderlyTaskStore
import OrderlyTestSupport
import Testing

/// Collects a store's events as they come.
@MainActor
private final class EventLog {
  private(set) var lines: [String] = []
  private var reader: Task<Void, Never>?

  init(_ store: TaskStore<String>) {
    let events = store.events()
    reader = Task { @MainActor [weak self] in
      for await event in events { self?.lines.append(event.description) }
    }
  }

  /// Waits until `count` events have arrived.
  func waitFor(_ count: Int) async {
    while lines.count < count { await Task.yield() }
  }

  deinit { reader?.cancel() }
}

@Suite("TaskStore: a task cancelled while it waits ends then, in order, once")
@MainActor
struct TaskStoreCancelWaitingTests {
  @Test(
    "cancelled on the store's actor: its end is recorded before cancel() returns",
    arguments: [TaskStorePolicy.enqueue, .cancelPreviousAndWait, .concurrent(limit: 1)]
  )
  func settledAtOnce(policy: TaskStorePolicy) async throws {
    let store = TaskStore<String>()
    let log = EventLog(store)
    let recorder = OrderedRecorder<String>()
    let a = Probe("A", log: recorder)
    let first = store.addTask(forKey: "k", policy: .enqueue) { try await a.run() }
    try await a.started.wait()
    // cancelPreviousAndWait would cancel A; every other policy leaves it running.
    let waitingPolicy: TaskStorePolicy =
      if case .cancelPreviousAndWait = policy { .enqueue } else { policy }
    let second = store.addTask(forKey: "k", policy: waitingPolicy) { "B" }
    #expect(store.queuedCount(forKey: "k") == 1)
    second.cancel()
    #expect(store.queuedCount(forKey: "k") == 0)
    #expect(store.state(forKey: "k").lastOutcome == .cancelled)
    await #expect(throws: CancellationError.self) { try await second.value }
    a.gate.open()
    #expect(try await first.value == "A")
    await log.waitFor(4)
    #expect(
      log.lines == [
        "started k #1", "waiting k #2", "ended k #2: cancelled", "ended k #1: succeeded",
      ]
    )
    #expect(store.state(forKey: "k").lastOutcome == .succeeded)
  }

  @Test("cancelled from another task: settled as soon as the store's actor runs, before A ends")
  func settledFromElsewhere() async throws {
    let store = TaskStore<String>()
    let log = EventLog(store)
    let a = Probe("A", log: OrderedRecorder())
    let first = store.addTask(forKey: "k", policy: .enqueue) { try await a.run() }
    try await a.started.wait()
    let second = store.addTask(forKey: "k", policy: .enqueue) { "B" }
    await Task.detached { second.cancel() }.value
    await log.waitFor(3)
    #expect(log.lines.last == "ended k #2: cancelled")
    a.gate.open()
    _ = try await first.value
    await log.waitFor(4)
    #expect(log.lines.last == "ended k #1: succeeded")
  }

  @Test("keepLatest: a task cancelled while it waited still ends exactly once")
  func keepLatestEndsOnce() async throws {
    let store = TaskStore<String>()
    let log = EventLog(store)
    let a = Probe("A", log: OrderedRecorder())
    let first = store.addTask(forKey: "k", policy: .keepLatest) { try await a.run() }
    try await a.started.wait()
    let second = store.addTask(forKey: "k", policy: .keepLatest) { "B" }
    // Cancelled off the store's actor, so the store learns of it only later...
    await Task.detached { second.cancel() }.value
    // ...and a newer task replaces the waiting one first.
    let third = store.addTask(forKey: "k", policy: .keepLatest) { "C" }
    a.gate.open()
    _ = try await first.value
    #expect(try await third.value == "C")
    await log.waitFor(6)
    for _ in 0..<20 { await Task.yield() }  // a late duplicate would arrive here
    let ends = log.lines.filter { $0.hasPrefix("ended") }
    #expect(ends.filter { $0.hasPrefix("ended k #2") } == ["ended k #2: cancelled"])
    #expect(ends.count == 3, "\(log.lines)")
  }
}
