import OrderlyTaskStore
import OrderlyTestSupport
import Synchronization
import Testing

/// A task-local value, as a dependency override or a trace context would be.
enum Caller {
  @TaskLocal static var name = "none"
}

@Suite("TaskStore: a waiting task runs in its own caller's context", .timeLimit(.minutes(1)))
@MainActor
struct TaskStoreContextTests {
  @Test(
    "a task that waits for its turn sees its own caller's task-local values, not those of the task ahead",
    arguments: [TaskStorePolicy.enqueue, .concurrent(limit: 1), .keepLatest]
  )
  func waitingTaskKeepsItsCallersTaskLocals(policy: TaskStorePolicy) async throws {
    let store = TaskStore<String>()
    let gate = Gate()
    let first = Caller.$name.withValue("first") {
      store.addTask(forKey: "k", policy: policy) { () async throws -> String in
        try await gate.wait()
        return "first:\(Caller.name)"
      }
    }
    let second = Caller.$name.withValue("second") {
      store.addTask(forKey: "k", policy: policy) { "second:\(Caller.name)" }
    }
    let waiting = store.queuedCount(forKey: "k")
    #expect(waiting == 1)
    gate.open()
    let values = [try await first.value, try await second.value]
    #expect(values == ["first:first", "second:second"])
  }

  @Test("a task that waits for its turn runs at its own caller's priority")
  func waitingTaskKeepsItsCallersPriority() async throws {
    let store = TaskStore<String>()
    let gate = Gate()
    let added = Gate()
    let handles = Mutex<[TaskStoreTask<TaskPriority>]>([])
    // Neither adding task is awaited, so neither is escalated to this test's priority.
    Task.detached(priority: .high) { @MainActor in
      let handle = store.addTask(forKey: "k", policy: .enqueue) { () async throws -> TaskPriority in
        try await gate.wait()
        return Task.currentPriority
      }
      handles.withLock { $0.append(handle) }
      Task.detached(priority: .low) { @MainActor in
        let handle = store.addTask(forKey: "k", policy: .enqueue) { Task.currentPriority }
        handles.withLock { $0.append(handle) }
        added.open()
      }
    }
    try await added.wait()
    let both = handles.withLock { $0 }
    try #require(both.count == 2)
    gate.open()
    let firstPriority = try await both[0].value
    let secondPriority = try await both[1].value
    #expect(firstPriority == .high)
    #expect(secondPriority == .low)
  }

  @Test("a waiting task cancelled before its turn never runs, and the line goes on")
  func cancelledWaitingTaskNeverRuns() async throws {
    let store = TaskStore<String>()
    let gate = Gate()
    let ran = Mutex<[String]>([])
    let first = store.addTask(forKey: "k", policy: .enqueue) { () async throws -> String in
      try await gate.wait()
      ran.withLock { $0.append("first") }
      return "first"
    }
    let second = store.addTask(forKey: "k", policy: .enqueue) { () -> String in
      ran.withLock { $0.append("second") }
      return "second"
    }
    let third = store.addTask(forKey: "k", policy: .enqueue) { () -> String in
      ran.withLock { $0.append("third") }
      return "third"
    }
    second.cancel()
    await #expect(throws: CancellationError.self) { try await second.value }
    gate.open()
    let values = [try await first.value, try await third.value]
    #expect(values == ["first", "third"])
    let order = ran.withLock { $0 }
    #expect(order == ["first", "third"])
    let idle = store.runningCount(forKey: "k") + store.queuedCount(forKey: "k")
    #expect(idle == 0)
  }
}
