import OrderlyCore
import OrderlyTestSupport
import Testing

/// An actor whose jobs touch its state synchronously: that compiles only if the job is isolated
/// to the actor, and `assertIsolated` checks it at run time.
actor Account {
  private(set) var balance = 0

  func deposit(_ amount: Int, through queue: SerialQueue) -> QueuedTask<Int> {
    queue.enqueue {
      self.assertIsolated()
      self.balance += amount
      return self.balance
    }
  }

  func depositAndWait(_ amount: Int, through queue: SerialQueue) async throws -> Int {
    try await queue.enqueueAndWait {
      self.assertIsolated()
      self.balance += amount
      return self.balance
    }
  }
}

@Suite("SerialQueue submission")
struct SerialQueueSubmissionTests {
  @Test("enqueue inherits the caller's actor isolation")
  func enqueueInheritsActor() async throws {
    let queue = SerialQueue()
    let account = Account()
    let first = await account.deposit(5, through: queue)
    let second = await account.deposit(7, through: queue)
    #expect(try await first.value == 5)
    #expect(try await second.value == 12)
  }

  @Test("enqueue from the main actor runs the job on the main actor")
  @MainActor
  func enqueueInheritsMainActor() async throws {
    let queue = SerialQueue()
    var counter = 0
    let job = queue.enqueue {
      MainActor.assertIsolated()
      counter += 1
      return counter
    }
    #expect(try await job.value == 1)
  }

  @Test("enqueue inherits task-local values and priority; enqueueDetached inherits neither")
  func inheritance() async throws {
    let queue = SerialQueue()
    let (attached, detached) = await Task(priority: .high) {
      Trace.$label.withValue("outer") {
        (
          queue.enqueue { (Trace.label, Task.currentPriority) },
          queue.enqueueDetached { (Trace.label, Task.currentPriority) }
        )
      }
    }.value
    let (attachedLabel, attachedPriority) = try await attached.value
    let (detachedLabel, _) = try await detached.value
    #expect(attachedLabel == "outer")
    #expect(attachedPriority >= .high)
    #expect(detachedLabel == nil)
  }

  @Test("enqueueDetached honours an explicit priority")
  func detachedPriority() async throws {
    let queue = SerialQueue()
    let low = queue.enqueueDetached(priority: .low) { Task.currentPriority }
    let high = queue.enqueueDetached(priority: .high) { Task.currentPriority }
    #expect(try await low.value == .low)
    #expect(try await high.value >= .high)
  }

  @Test("enqueueAndWait runs in the caller's task: its task-local values and isolation")
  func enqueueAndWaitInCallersTask() async throws {
    let queue = SerialQueue()
    let label = try await Trace.$label.withValue("caller") {
      try await queue.enqueueAndWait { Trace.label }
    }
    #expect(label == "caller")
    let account = Account()
    #expect(try await account.depositAndWait(3, through: queue) == 3)
    #expect(try await account.depositAndWait(4, through: queue) == 7)
  }

  @Test("uncontended enqueueAndWait runs without suspending: no other main-actor job slips in")
  @MainActor
  func enqueueAndWaitDoesNotHop() async throws {
    let queue = SerialQueue()
    var interleaved = false
    // Queued on the main actor before the call: it can only run if the call suspends.
    let other = Task { @MainActor in interleaved = true }
    let value = try await queue.enqueueAndWait {
      MainActor.assertIsolated()
      return 42
    }
    #expect(value == 42)
    #expect(!interleaved)
    await other.value
    #expect(interleaved)
  }

  @Test("enqueueAndWait returns a non-Sendable result to the caller")
  func nonSendableResult() async throws {
    final class Box {
      var value = 1
    }
    let queue = SerialQueue()
    let box = try await queue.enqueueAndWait { Box() }
    box.value += 1
    #expect(box.value == 2)
  }

  @Test("a handle is Hashable by job and reports its name")
  func handleIdentity() async throws {
    let queue = SerialQueue()
    let first = queue.enqueue(name: "first") { 1 }
    let second = queue.enqueueDetached(name: "second") { 2 }
    #expect(first == first)
    #expect(Set([first, first, second].map(\.id)).count == 2)
    #expect(Set([first, first]).count == 1)
    #expect(first.name == "first" && second.name == "second")
    #expect(try await first.result.get() == 1)
    #expect(try await second.result.get() == 2)
    #expect(!first.isCancelled)
  }
}

@Suite("SerialQueue errors")
struct QueueErrorTests {
  @Test(
    "an error thrown by a job reaches its awaiter unchanged and the queue goes on",
    arguments: ["enqueue", "enqueueDetached", "enqueueAndWait"]
  )
  func errorsReachAwaiter(kind: String) async throws {
    let queue = SerialQueue()
    let failing: @Sendable () async throws -> Int = { throw TestError(code: 42) }
    await #expect(throws: TestError(code: 42)) {
      switch kind {
      case "enqueue": _ = try await queue.enqueue(operation: failing).value
      case "enqueueDetached": _ = try await queue.enqueueDetached(operation: failing).value
      default: _ = try await queue.enqueueAndWait(operation: failing)
      }
    }
    #expect(try await queue.enqueue { 7 }.value == 7)
    #expect(try await queue.enqueueDetached { 8 }.value == 8)
  }

  @Test("a failed job's result is the same error value")
  func resultCarriesError() async throws {
    let queue = SerialQueue()
    let job = queue.enqueueDetached { () throws -> Int in throw TestError(code: 3) }
    guard case .failure(let error) = await job.result else {
      Issue.record("expected a failure")
      return
    }
    #expect(error as? TestError == TestError(code: 3))
  }
}
