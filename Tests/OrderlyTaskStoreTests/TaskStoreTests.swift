import Observation
import OrderlyCore
import OrderlyTaskStore
import OrderlyTestSupport
import Synchronization
import Testing

struct Failure: Error, Equatable {}

/// How the task under test ends.
enum Ending: String, CaseIterable, Sendable {
  case success, failure, cancellation
}

/// A task body the test controls: it records its start, waits at its gate, and ends as told.
///
/// `windDown` makes it keep running for a while after cancellation, until the test lets it go.
final class Probe: Sendable {
  let name: String
  let gate = Gate()
  let windDown = Gate()
  let started = Gate()
  let log: OrderedRecorder<String>
  private let slowToStop: Bool

  init(_ name: String, log: OrderedRecorder<String>, slowToStop: Bool = false) {
    self.name = name
    self.log = log
    self.slowToStop = slowToStop
  }

  /// The operation: succeeds with the name, fails, or throws CancellationError when cancelled.
  func run(_ ending: Ending = .success) async throws -> String {
    log.record("\(name) started")
    started.open()
    do {
      try await gate.wait()
    } catch {
      if slowToStop {
        // Winding down: not cancellable, until the test opens windDown from a fresh task.
        await Task.detached { [windDown] in try? await windDown.wait() }.value
      }
      log.record("\(name) cancelled")
      throw error
    }
    log.record("\(name) ended")
    if ending == .failure { throw Failure() }
    return name
  }
}

/// Checks a handle ended the way `ending` says for a task that ran to its end.
func expect(_ handle: TaskStoreTask<String>, endedWith ending: Ending, value: String) async {
  switch ending {
  case .success: #expect((try? await handle.value) == value)
  case .failure: await #expect(throws: Failure.self) { try await handle.value }
  case .cancellation: await #expect(throws: CancellationError.self) { try await handle.value }
  }
}

@Suite("TaskStore policies", .timeLimit(.minutes(1)))
@MainActor
struct TaskStorePolicyTests {
  let log = OrderedRecorder<String>()
  let store = TaskStore<String>()

  /// Lets `probe` end as `ending` says: open its gate, or cancel its handle.
  func finish(_ probe: Probe, _ handle: TaskStoreTask<String>, _ ending: Ending) {
    if ending == .cancellation { handle.cancel() } else { probe.gate.open() }
  }

  @Test(
    ".cancelPrevious cancels the running task and starts the new one at once",
    arguments: Ending.allCases
  )
  func cancelPrevious(ending: Ending) async throws {
    let a = Probe("a", log: log)
    let b = Probe("b", log: log)
    let first = store.addTask(forKey: "k", policy: .cancelPrevious) { try await a.run() }
    try await a.started.wait()
    let second = store.addTask(forKey: "k", policy: .cancelPrevious) { try await b.run(ending) }
    await #expect(throws: CancellationError.self) { try await first.value }
    try await b.started.wait()
    finish(b, second, ending)
    await expect(second, endedWith: ending, value: "b")
    #expect(store.state(forKey: "k").performedCount == 2)
    #expect(!store.isRunning(forKey: "k"))
    #expect(
      store.state(forKey: "k").lastOutcome?.rawValue
        == [.success: "succeeded", .failure: "failed", .cancellation: "cancelled"][ending]
    )
  }

  @Test(
    ".cancelPreviousAndWait starts the new task only after the old one has ended",
    arguments: Ending.allCases
  )
  func cancelPreviousAndWait(ending: Ending) async throws {
    let a = Probe("a", log: log, slowToStop: true)
    let b = Probe("b", log: log)
    let first = store.addTask(forKey: "k", policy: .cancelPreviousAndWait) { try await a.run() }
    try await a.started.wait()
    let second = store.addTask(forKey: "k", policy: .cancelPreviousAndWait) {
      try await b.run(ending)
    }
    #expect(store.queuedCount(forKey: "k") == 1 && store.runningCount(forKey: "k") == 1)
    #expect(!b.started.isOpen)
    a.windDown.open()
    await #expect(throws: CancellationError.self) { try await first.value }
    try await b.started.wait()
    finish(b, second, ending)
    await expect(second, endedWith: ending, value: "b")
    #expect(log.values.prefix(3) == ["a started", "a cancelled", "b started"])
  }

  @Test(".enqueue runs tasks of a key one after another, in order", arguments: Ending.allCases)
  func enqueue(ending: Ending) async throws {
    let probes = ["a", "b", "c"].map { Probe($0, log: log) }
    let handles = probes.map { probe in
      store.addTask(forKey: "k", policy: .enqueue) { try await probe.run(ending) }
    }
    #expect(store.runningCount(forKey: "k") == 1 && store.queuedCount(forKey: "k") == 2)
    for (probe, handle) in zip(probes, handles) {
      try await probe.started.wait()
      finish(probe, handle, ending)
      await expect(handle, endedWith: ending, value: probe.name)
    }
    let ends = log.values.filter { !$0.hasSuffix("started") }.map { String($0.prefix(1)) }
    #expect(ends == ["a", "b", "c"])
    #expect(
      log.values.filter { $0.hasSuffix("started") } == ["a started", "b started", "c started"]
    )
  }

  @Test(".concurrent(limit: 2) runs two at once and queues the third", arguments: Ending.allCases)
  func concurrent(ending: Ending) async throws {
    let probes = ["a", "b", "c"].map { Probe($0, log: log) }
    let handles = probes.map { probe in
      store.addTask(forKey: "k", policy: .concurrent(limit: 2)) { try await probe.run(ending) }
    }
    try await probes[0].started.wait()
    try await probes[1].started.wait()
    #expect(store.runningCount(forKey: "k") == 2 && store.queuedCount(forKey: "k") == 1)
    #expect(!probes[2].started.isOpen)
    finish(probes[1], handles[1], ending)
    await expect(handles[1], endedWith: ending, value: "b")
    try await probes[2].started.wait()
    for index in [0, 2] { finish(probes[index], handles[index], ending) }
    await expect(handles[0], endedWith: ending, value: "a")
    await expect(handles[2], endedWith: ending, value: "c")
    let unlimited = (0..<5).map { index in
      store.addTask(forKey: "u", policy: .concurrent(limit: nil)) { index }
    }
    for (index, handle) in unlimited.enumerated() { #expect(try await handle.value == index) }
  }

  @Test(
    ".dropNew keeps the running task; the new handle reports dropped",
    arguments: Ending.allCases
  )
  func dropNew(ending: Ending) async throws {
    let a = Probe("a", log: log)
    let first = store.addTask(forKey: "k", policy: .dropNew) { try await a.run(ending) }
    try await a.started.wait()
    let dropped = store.addTask(forKey: "k", policy: .dropNew) { "never" }
    await #expect(throws: TaskStoreError.dropped(key: "k", policy: .dropNew)) {
      try await dropped.value
    }
    if case .dropped = await dropped.outcome {} else { Issue.record("not reported dropped") }
    #expect(store.state(forKey: "k").lastOutcome == .dropped)
    finish(a, first, ending)
    await expect(first, endedWith: ending, value: "a")
    #expect(store.state(forKey: "k").performedCount == 1)
    let later = store.addTask(forKey: "k", policy: .dropNew) { "ran" }
    #expect(try await later.value == "ran")  // nothing running any more: not dropped
  }

  @Test(
    ".keepLatest keeps one waiting task, the newest; older waiting ones report dropped",
    arguments: Ending.allCases
  )
  func keepLatest(ending: Ending) async throws {
    let a = Probe("a", log: log)
    let c = Probe("c", log: log)
    let first = store.addTask(forKey: "k", policy: .keepLatest) { try await a.run() }
    try await a.started.wait()
    let b = store.addTask(forKey: "k", policy: .keepLatest) { "b" }
    let third = store.addTask(forKey: "k", policy: .keepLatest) { try await c.run(ending) }
    await #expect(throws: TaskStoreError.dropped(key: "k", policy: .keepLatest)) {
      try await b.value
    }
    #expect(store.queuedCount(forKey: "k") == 1)
    a.gate.open()
    #expect(try await first.value == "a")
    try await c.started.wait()
    finish(c, third, ending)
    await expect(third, endedWith: ending, value: "c")
  }

  @Test(".joinExisting returns the running task's handle", arguments: Ending.allCases)
  func joinExisting(ending: Ending) async throws {
    let a = Probe("a", log: log)
    let first = store.addTask(forKey: "k", policy: .joinExisting) { try await a.run(ending) }
    try await a.started.wait()
    let joined = store.addTask(forKey: "k", policy: .joinExisting) { "second" }
    #expect(joined == first)
    #expect(store.runningCount(forKey: "k") == 1)
    finish(a, first, ending)
    await expect(joined, endedWith: ending, value: "a")
    let fresh = store.addTask(forKey: "k", policy: .joinExisting) { "fresh" }
    #expect(try await fresh.value == "fresh")  // nothing running: a new task
  }

  @Test("the default policy is cancelPrevious")
  func defaultPolicy() async throws {
    let a = Probe("a", log: log)
    let first = store.addTask(forKey: "k") { try await a.run() }
    try await a.started.wait()
    let second = store.addTask(forKey: "k") { "b" }
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(try await second.value == "b")
  }
}

@Suite("TaskStore identity, lifetime, observation", .timeLimit(.minutes(1)))
@MainActor
struct TaskStoreBehaviourTests {
  let log = OrderedRecorder<String>()

  @Test(
    "an older task that ends never clears the state of a newer one",
    arguments: [
      TaskStorePolicy.cancelPrevious, .cancelPreviousAndWait, .enqueue, .concurrent(limit: 2),
      .dropNew, .keepLatest, .joinExisting,
    ]
  )
  func identity(policy: TaskStorePolicy) async throws {
    let store = TaskStore<Int>()
    let old = Probe("old", log: log, slowToStop: true)
    let new = Probe("new", log: log)
    let oldTask = store.addTask(forKey: 1, policy: policy) { try await old.run() }
    try await old.started.wait()
    let newTask = store.addTask(forKey: 1, policy: policy) { try await new.run() }
    // End the old task, however the policy treats it.
    old.gate.open()
    old.windDown.open()
    _ = await oldTask.outcome
    // The store's view of the key now follows the newer task alone.
    switch policy {
    case .dropNew, .joinExisting:
      #expect(!store.isRunning(forKey: 1))  // no newer task ran
    default:
      try await new.started.wait()
      #expect(store.isRunning(forKey: 1) && store.runningCount(forKey: 1) == 1)
      new.gate.open()
      #expect(try await newTask.value == "new")
      #expect(!store.isRunning(forKey: 1))
    }
  }

  @Test("releasing the store cancels running tasks and resumes waiting awaiters at once")
  func lifetime() async throws {
    var store: TaskStore<Int>? = TaskStore<Int>()
    let a = Probe("a", log: log)
    let running = store?.addTask(forKey: 1, policy: .enqueue) { try await a.run() }
    let waiting = store?.addTask(forKey: 1, policy: .enqueue) { "never runs" }
    try await a.started.wait()
    store = nil
    await #expect(throws: CancellationError.self) { try await waiting?.value }
    await #expect(throws: CancellationError.self) { try await running?.value }
    #expect(!log.values.contains("never runs"))
  }

  @Test("cancelling a waiting task resumes its awaiter at once; it never runs")
  func cancelWaiting() async throws {
    let store = TaskStore<Int>()
    let a = Probe("a", log: log)
    _ = store.addTask(forKey: 1, policy: .enqueue) { try await a.run() }
    let waiting = store.addTask(forKey: 1, policy: .enqueue) { "never" }
    try await a.started.wait()
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
    #expect(store.queuedCount(forKey: 1) == 0 && waiting.isCancelled)
    store.cancelTask(forKey: 1)
    #expect(!store.isRunning(forKey: 1) || store.runningCount(forKey: 1) <= 1)
  }

  @Test("cancelTask and cancelAll reach running and waiting tasks")
  func cancelCalls() async throws {
    let store = TaskStore<Int>()
    let probes = (0..<3).map { Probe("\($0)", log: log) }
    let handles = probes.enumerated().map { index, probe in
      store.addTask(forKey: index < 2 ? 1 : 2, policy: .enqueue) { try await probe.run() }
    }
    try await probes[0].started.wait()
    store.cancelTask(forKey: 1)
    await #expect(throws: CancellationError.self) { try await handles[0].value }
    await #expect(throws: CancellationError.self) { try await handles[1].value }
    try await probes[2].started.wait()
    store.cancelAll()
    await #expect(throws: CancellationError.self) { try await handles[2].value }
  }

  @Test("isRunning(forKey:) is observable")
  func observation() async throws {
    let store = TaskStore<String>()
    let changed = Gate()
    withObservationTracking {
      _ = store.isRunning(forKey: "doThing")
    } onChange: {
      changed.open()
    }
    let a = Probe("a", log: log)
    let task = store.addTask(forKey: "doThing") { try await a.run() }
    try await changed.wait()
    let ended = Gate()
    withObservationTracking {
      _ = store.isRunning(forKey: "doThing")
    } onChange: {
      ended.open()
    }
    a.gate.open()
    _ = try await task.value
    try await ended.wait()
    #expect(!store.isRunning(forKey: "doThing"))
  }

  @Test("events report every step in order")
  func events() async throws {
    let store = TaskStore<String>()
    let events = store.events()
    let a = Probe("a", log: log)
    let first = store.addTask(forKey: "k", policy: .enqueue) { try await a.run() }
    let second = store.addTask(forKey: "k", policy: .enqueue) { "b" }
    _ = store.addTask(forKey: "k", policy: .dropNew) { "c" }
    a.gate.open()
    _ = try await first.value
    _ = try await second.value
    var seen: [String] = []
    for await event in events {
      seen.append(event.description)
      if seen.count == 6 { break }
    }
    #expect(
      seen == [
        "started k #1", "waiting k #2", "ended k #3: dropped", "ended k #1: succeeded",
        "started k #2", "ended k #2: succeeded",
      ]
    )
  }
}

/// A store owned by a custom actor: it compiles, and its tasks run on that actor.
actor Downloader {
  let store = TaskStore<Int>()
  var completed = 0

  func download(_ id: Int) -> TaskStoreTask<Int> {
    store.addTask(forKey: id, policy: .joinExisting) {
      self.completed += 1  // on the actor: no await needed
      return id * 10
    }
  }
}

@Suite("TaskStore on a custom actor, and under stress", .timeLimit(.minutes(2)))
struct TaskStoreActorTests {
  @Test("a custom actor owns a store; tasks run isolated to it")
  func customActor() async throws {
    let downloader = Downloader()
    #expect(try await downloader.download(4).value == 40)
    #expect(await downloader.completed == 1)
  }

  @Test("2,000 calls, random policies and cancellations: every handle resolves, nothing leaks")
  @MainActor
  func stress() async throws {
    let store = TaskStore<Int>()
    let policies: [TaskStorePolicy] = [
      .cancelPrevious, .cancelPreviousAndWait, .enqueue, .concurrent(limit: 3), .dropNew,
      .keepLatest, .joinExisting,
    ]
    var generator = SeededGenerator(seed: 11)
    var handles: [TaskStoreTask<Int>] = []
    for index in 0..<2_000 {
      let policy = policies[Int(generator.next() % UInt64(policies.count))]
      let key = Int(generator.next() % 8)
      let handle = store.addTask(forKey: key, policy: policy) {
        for _ in 0..<Int(index % 3) { await Task.yield() }
        return index
      }
      handles.append(handle)
      if generator.next() % 5 == 0 {
        handles[Int(generator.next() % UInt64(handles.count))].cancel()
      }
      if index % 100 == 0 { await Task.yield() }
    }
    for handle in handles { _ = await handle.outcome }
    for key in 0..<8 {
      while store.isRunning(forKey: key) || store.queuedCount(forKey: key) > 0 {
        await Task.yield()
      }
    }
    #expect((0..<8).allSatisfy { store.state(forKey: $0).lastOutcome != nil })
  }
}
