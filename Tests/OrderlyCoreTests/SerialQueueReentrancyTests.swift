import OrderlyCore
import OrderlyTestSupport
import Testing

@Suite("SerialQueue and ConcurrentQueue(limit: 1): reentrancy")
struct SerialQueueReentrancyTests {
  @Test(
    "enqueueAndWait inside a job of the same queue fails at once with reentrantWait",
    arguments: QueueKind.allCases,
    ["enqueue", "enqueueDetached", "enqueueAndWait"]
  )
  func nestedEnqueueAndWait(kind: QueueKind, outer: String) async throws {
    let queue = kind.make(name: "notes")
    let inner: @Sendable () async throws -> Int = {
      try await queue.enqueueAndWait { 1 }
    }
    await #expect(throws: QueueError.reentrantWait(queue: "notes")) {
      switch outer {
      case "enqueue": _ = try await queue.enqueue(operation: inner).value
      case "enqueueDetached": _ = try await queue.enqueueDetached(operation: inner).value
      default: _ = try await queue.enqueueAndWait(operation: inner)
      }
    }
    #expect(try await queue.enqueueAndWait { 2 } == 2)
  }

  @Test(
    "awaiting a later job's value inside a job fails at once with reentrantWait",
    arguments: QueueKind.allCases
  )
  func awaitingLaterJob(kind: QueueKind) async throws {
    let queue = kind.make(name: "q")
    let outcome = try await queue.enqueueAndWait { () async -> Result<Int, any Error> in
      let later = queue.enqueue { 1 }
      return await later.result
    }
    guard case .failure(let error) = outcome else {
      Issue.record("expected reentrantWait")
      return
    }
    #expect(error as? QueueError == .reentrantWait(queue: "q"))
  }

  @Test(
    "waitUntilIdle inside a job fails at once with reentrantWait",
    arguments: QueueKind.allCases
  )
  func waitUntilIdleInside(kind: QueueKind) async throws {
    let queue = kind.make(name: "idle")
    await #expect(throws: QueueError.reentrantWait(queue: "idle")) {
      try await queue.enqueueDetached { try await queue.waitUntilIdle() }.value
    }
  }

  @Test(
    "fire-and-forget enqueue inside a job runs after the current job",
    arguments: QueueKind.allCases
  )
  func enqueueInsideJob(kind: QueueKind) async throws {
    let queue = kind.make()
    let log = OrderedRecorder<String>()
    let inner = try await queue.enqueueAndWait {
      let inner = queue.enqueue { log.record("inner") }
      await Task.yield()
      log.record("outer")
      return inner
    }
    try await inner.value
    #expect(log.values == ["outer", "inner"])
  }

  @Test(
    "a job may await an earlier job that has ended, and work on another queue",
    arguments: QueueKind.allCases
  )
  func legitimateWaits(kind: QueueKind) async throws {
    let queue = kind.make()
    let other = kind.make()
    let earlier = queue.enqueue { 1 }
    let total = try await queue.enqueueAndWait {
      let fromOther = try await other.enqueueAndWait { 2 }
      return try await earlier.value + fromOther
    }
    #expect(total == 3)
  }

  @Test(
    "a cycle through another queue back to the first is detected",
    arguments: QueueKind.allCases
  )
  func cycleThroughAnotherQueue(kind: QueueKind) async throws {
    let first = kind.make(name: "first")
    let second = kind.make(name: "second")
    await #expect(throws: QueueError.reentrantWait(queue: "first")) {
      try await first.enqueueAndWait {
        try await second.enqueueAndWait {
          try await first.enqueueAndWait { 1 }
        }
      }
    }
  }

  @Test(
    "a cycle closed through jobs submitted with enqueue is detected, not a silent hang",
    .timeLimit(.minutes(1)),
    arguments: QueueKind.allCases,
    ["enqueue(...).value", "enqueueAndWait", "waitUntilIdle"]
  )
  func cycleThroughEnqueuedJobs(kind: QueueKind, closing: String) async throws {
    let a = kind.make(name: "a")
    let b = kind.make(name: "b")
    // A job of a waits on b, whose job waits on a: the job of a can never end.
    let result = await a.enqueue { () async throws -> Int in
      try await b.enqueue { () async throws -> Int in
        switch closing {
        case "enqueue(...).value": return try await a.enqueue { 1 }.value
        case "enqueueAndWait": return try await a.enqueueAndWait { 1 }
        default:
          try await a.waitUntilIdle()
          return 1
        }
      }.value
    }.result
    var error: QueueError?
    if case .failure(let failure) = result { error = failure as? QueueError }
    #expect(error == .reentrantWait(queue: "a"))
    let after = try await a.enqueueAndWait { 2 }
    #expect(after == 2)
  }

  @Test(
    "a task started from an ended job is not mistaken for a reentrant wait",
    arguments: QueueKind.allCases
  )
  func staleContext(kind: QueueKind) async throws {
    let queue = kind.make()
    let proceed = Gate()
    let escaped = try await queue.enqueueAndWait {
      Task {
        try await proceed.wait()
        return try await queue.enqueueAndWait { 5 }
      }
    }
    proceed.open()
    #expect(try await escaped.value == 5)
  }

  @Test(
    "a detached job is seen from its child tasks and through a cycle via another queue",
    arguments: QueueKind.allCases
  )
  func detachedJobFrame(kind: QueueKind) async throws {
    let first = kind.make(name: "first")
    let second = kind.make(name: "second")
    await #expect(throws: QueueError.reentrantWait(queue: "first")) {
      try await first.enqueueDetached {
        async let child = first.enqueueAndWait { 1 }
        return try await child
      }.value
    }
    await #expect(throws: QueueError.reentrantWait(queue: "first")) {
      try await first.enqueueDetached {
        try await second.enqueueAndWait {
          try await first.enqueueAndWait { 1 }
        }
      }.value
    }
  }

  @Test(
    "a task started from an ended detached job is not mistaken for a reentrant wait",
    arguments: QueueKind.allCases
  )
  func staleDetachedFrame(kind: QueueKind) async throws {
    let queue = kind.make()
    let proceed = Gate()
    let escaped = try await queue.enqueueDetached {
      Task {
        try await proceed.wait()
        return try await queue.enqueueAndWait { 5 }
      }
    }.value
    // Another detached job runs on the runner after the first ended, then the escaped task waits.
    try await queue.enqueueDetached {}.value
    proceed.open()
    #expect(try await escaped.value == 5)
  }

  @Test("the error says what happened and what to do")
  func errorMessage() {
    let message = QueueError.reentrantWait(queue: "notes").description
    #expect(message.contains("'notes'"))
    #expect(message.contains("deadlock"))
    #expect(message.contains("enqueue("))
  }
}
