import OrderlyCore
import OrderlyTestSupport
import Testing

/// An actor whose jobs touch its state synchronously: that compiles only if the job is isolated
/// to the actor, and `assertIsolated` checks it at run time.
actor Account {
  private(set) var balance = 0

  func deposit(_ amount: Int, through queue: TestQueue) -> QueuedTask<Int> {
    queue.enqueue {
      self.assertIsolated()
      self.balance += amount
      return self.balance
    }
  }

  func depositAndWait(_ amount: Int, through queue: TestQueue) async throws -> Int {
    try await queue.enqueueAndWait {
      self.assertIsolated()
      self.balance += amount
      return self.balance
    }
  }
}

@Suite("SerialQueue and ConcurrentQueue(limit: 1): submission")
struct SerialQueueSubmissionTests {
  @Test("enqueue inherits the caller's actor isolation", arguments: QueueKind.allCases)
  func enqueueInheritsActor(kind: QueueKind) async throws {
    let queue = kind.make()
    let account = Account()
    let first = await account.deposit(5, through: queue)
    let second = await account.deposit(7, through: queue)
    #expect(try await first.value == 5)
    #expect(try await second.value == 12)
  }

  @Test("enqueue from the main actor runs the job on the main actor", arguments: QueueKind.allCases)
  @MainActor
  func enqueueInheritsMainActor(kind: QueueKind) async throws {
    let queue = kind.make()
    var counter = 0
    let job = queue.enqueue {
      MainActor.assertIsolated()
      counter += 1
      return counter
    }
    #expect(try await job.value == 1)
  }

  @Test(
    "enqueue inherits task-local values and priority; enqueueDetached inherits neither",
    arguments: QueueKind.allCases
  )
  func inheritance(kind: QueueKind) async throws {
    let queue = kind.make()
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

  @Test("enqueueDetached honours an explicit priority", arguments: QueueKind.allCases)
  func detachedPriority(kind: QueueKind) async throws {
    let queue = kind.make()
    // Read through a recorder and gates, not by awaiting the jobs: awaiting a job from a
    // higher-priority task raises it, as awaiting a Task does, and so does a higher-priority
    // job queued behind it; so the high job is enqueued once the low one has run.
    let seen = OrderedRecorder<TaskPriority>()
    let lowDone = Gate()
    let done = Gate()
    queue.enqueueDetached(priority: .low) {
      seen.record(Task.currentPriority)
      lowDone.open()
    }
    try await lowDone.wait()
    queue.enqueueDetached(priority: .high) {
      seen.record(Task.currentPriority)
      done.open()
    }
    try await done.wait()
    #expect(seen.values.first == .low)
    #expect(seen.values.last.map { $0 >= .high } == true)
  }

  @Test(
    "enqueueAndWait runs in the caller's task: its task-local values and isolation",
    arguments: QueueKind.allCases
  )
  func enqueueAndWaitInCallersTask(kind: QueueKind) async throws {
    let queue = kind.make()
    let label = try await Trace.$label.withValue("caller") {
      try await queue.enqueueAndWait { Trace.label }
    }
    #expect(label == "caller")
    let account = Account()
    #expect(try await account.depositAndWait(3, through: queue) == 3)
    #expect(try await account.depositAndWait(4, through: queue) == 7)
  }

  @Test(
    "uncontended enqueueAndWait runs without suspending: no other main-actor job slips in",
    arguments: QueueKind.allCases
  )
  @MainActor
  func enqueueAndWaitDoesNotHop(kind: QueueKind) async throws {
    let queue = kind.make()
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

  @Test("enqueueAndWait returns a non-Sendable result to the caller", arguments: QueueKind.allCases)
  func nonSendableResult(kind: QueueKind) async throws {
    final class Box {
      var value = 1
    }
    let queue = kind.make()
    let box = try await queue.enqueueAndWait { Box() }
    box.value += 1
    #expect(box.value == 2)
  }

  @Test("a handle is Hashable by job and reports its name", arguments: QueueKind.allCases)
  func handleIdentity(kind: QueueKind) async throws {
    let queue = kind.make()
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

@Suite("SerialQueue and ConcurrentQueue(limit: 1): errors")
struct QueueErrorTests {
  @Test(
    "an error thrown by a job reaches its awaiter unchanged and the queue goes on",
    arguments: QueueKind.allCases,
    ["enqueue", "enqueueDetached", "enqueueAndWait"]
  )
  func errorsReachAwaiter(kind: QueueKind, submission: String) async throws {
    let queue = kind.make()
    let failing: @Sendable () async throws -> Int = { throw TestError(code: 42) }
    await #expect(throws: TestError(code: 42)) {
      switch submission {
      case "enqueue": _ = try await queue.enqueue(operation: failing).value
      case "enqueueDetached": _ = try await queue.enqueueDetached(operation: failing).value
      default: _ = try await queue.enqueueAndWait(operation: failing)
      }
    }
    #expect(try await queue.enqueue { 7 }.value == 7)
    #expect(try await queue.enqueueDetached { 8 }.value == 8)
  }

  @Test("a failed job's result is the same error value", arguments: QueueKind.allCases)
  func resultCarriesError(kind: QueueKind) async throws {
    let queue = kind.make()
    let job = queue.enqueueDetached { () throws -> Int in throw TestError(code: 3) }
    guard case .failure(let error) = await job.result else {
      Issue.record("expected a failure")
      return
    }
    #expect(error as? TestError == TestError(code: 3))
  }
}
