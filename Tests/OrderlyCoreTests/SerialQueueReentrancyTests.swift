import OrderlyCore
import OrderlyTestSupport
import Testing

@Suite("SerialQueue reentrancy")
struct SerialQueueReentrancyTests {
  @Test(
    "enqueueAndWait inside a job of the same queue fails at once with reentrantWait",
    arguments: ["enqueue", "enqueueDetached", "enqueueAndWait"]
  )
  func nestedEnqueueAndWait(outer: String) async throws {
    let queue = SerialQueue(name: "notes")
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

  @Test("awaiting a later job's value inside a job fails at once with reentrantWait")
  func awaitingLaterJob() async throws {
    let queue = SerialQueue(name: "q")
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

  @Test("waitUntilIdle inside a job fails at once with reentrantWait")
  func waitUntilIdleInside() async throws {
    let queue = SerialQueue(name: "idle")
    await #expect(throws: QueueError.reentrantWait(queue: "idle")) {
      try await queue.enqueueDetached { try await queue.waitUntilIdle() }.value
    }
  }

  @Test("fire-and-forget enqueue inside a job runs after the current job")
  func enqueueInsideJob() async throws {
    let queue = SerialQueue()
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

  @Test("a job may await an earlier job that has ended, and work on another queue")
  func legitimateWaits() async throws {
    let queue = SerialQueue()
    let other = SerialQueue()
    let earlier = queue.enqueue { 1 }
    let total = try await queue.enqueueAndWait {
      let fromOther = try await other.enqueueAndWait { 2 }
      return try await earlier.value + fromOther
    }
    #expect(total == 3)
  }

  @Test("a cycle through another queue back to the first is detected")
  func cycleThroughAnotherQueue() async throws {
    let first = SerialQueue(name: "first")
    let second = SerialQueue(name: "second")
    await #expect(throws: QueueError.reentrantWait(queue: "first")) {
      try await first.enqueueAndWait {
        try await second.enqueueAndWait {
          try await first.enqueueAndWait { 1 }
        }
      }
    }
  }

  @Test("a task started from an ended job is not mistaken for a reentrant wait")
  func staleContext() async throws {
    let queue = SerialQueue()
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

  @Test("the error says what happened and what to do")
  func errorMessage() {
    let message = QueueError.reentrantWait(queue: "notes").description
    #expect(message.contains("'notes'"))
    #expect(message.contains("deadlock"))
    #expect(message.contains("enqueue("))
  }
}
