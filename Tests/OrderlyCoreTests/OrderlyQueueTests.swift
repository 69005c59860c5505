import OrderlyCore
import OrderlyTestSupport
import Testing

/// An actor for the `ActorQueue` case.
private actor Holder {}

/// One of the six queues behind the shared protocol, and a way to enqueue a job on it.
private struct Subject: Sendable, CustomTestStringConvertible {
  let label: String
  let queue: any OrderlyQueue
  /// Enqueues a job that waits at the gate; returns its handle.
  let enqueueWaiting: @Sendable (Gate) -> QueuedTask<Void>

  var testDescription: String { label }

  static let all: [Subject] = [
    {
      let queue = SerialQueue(name: "shared.serial")
      return Subject(label: "SerialQueue", queue: queue) { gate in
        queue.enqueueDetached { try await gate.wait() }
      }
    }(),
    {
      let queue = ConcurrentQueue(name: "shared.concurrent", limit: 1)
      return Subject(label: "ConcurrentQueue", queue: queue) { gate in
        queue.enqueueDetached { try await gate.wait() }
      }
    }(),
    {
      let queue = ActorQueue<Holder>(name: "shared.actor")
      let holder = Holder()
      return Subject(label: "ActorQueue", queue: queue) { gate in
        queue.enqueue(on: holder) { _ in try await gate.wait() }
      }
    }(),
    {
      let queue = MainActorQueue(name: "shared.main")
      return Subject(label: "MainActorQueue", queue: queue) { gate in
        queue.enqueue { try await gate.wait() }
      }
    }(),
    {
      let queue = KeyedSerialQueue<Int>(name: "shared.keyed")
      return Subject(label: "KeyedSerialQueue", queue: queue) { gate in
        queue.enqueueDetached(forKey: 7) { try await gate.wait() }
      }
    }(),
    {
      let queue = CoalescingQueue(name: "shared.coalescing")
      return Subject(label: "CoalescingQueue", queue: queue) { gate in
        queue.enqueue { try await gate.wait() }
      }
    }(),
  ]
}

/// Cancels everything and waits, through the protocol alone (the example in its documentation).
private func shutDown(_ queue: some OrderlyQueue) async throws {
  queue.cancelAll()
  try await queue.waitUntilIdle()
}

@Suite("OrderlyQueue: the members every queue shares")
struct OrderlyQueueTests {
  @Test(
    "name, counts, events, cancelAll and waitUntilIdle through the protocol",
    arguments: Subject.all
  )
  private func sharedMembers(_ subject: Subject) async throws {
    let queue = subject.queue
    #expect(queue.name.hasPrefix("shared."))
    #expect(queue.isIdle)
    var events = queue.events.makeAsyncIterator()
    let gate = Gate()
    let first = subject.enqueueWaiting(gate)
    let second = subject.enqueueWaiting(gate)
    #expect(await events.skip(to: 2, where: isEnqueued) != nil)
    // Both jobs are either running (suspended at the gate) or waiting for their turn.
    try await gate.waitForWaiters(1)
    #expect(!queue.isIdle)
    #expect(queue.runningCount + queue.pendingCount == 2)
    #expect(queue.runningCount >= 1)
    try await shutDown(queue)
    #expect(await endsCancelled(first))
    #expect(await endsCancelled(second))
    #expect(queue.isIdle)
    #expect(queue.pendingCount == 0)
    #expect(queue.runningCount == 0)
  }

  @Test("isCurrent and the assertions through the protocol of the queues that have them")
  func assertable() async throws {
    let queues: [any AssertableQueue] = [SerialQueue(), ConcurrentQueue(limit: 2)]
    for queue in queues {
      #expect(!queue.isCurrent)
      let inside = try await runInside(queue)
      #expect(inside)
    }
  }
}

/// Whether a job of `queue` sees itself inside the queue (and passes both assertions).
private func runInside(_ queue: some AssertableQueue) async throws -> Bool {
  let seen: QueuedTask<Bool>
  if let serial = queue as? SerialQueue {
    seen = serial.enqueueDetached {
      serial.assertOnQueue()
      serial.preconditionOnQueue()
      return serial.isCurrent
    }
  } else if let concurrent = queue as? ConcurrentQueue {
    seen = concurrent.enqueueDetached {
      concurrent.assertOnQueue()
      concurrent.preconditionOnQueue()
      return concurrent.isCurrent
    }
  } else {
    return false
  }
  return try await seen.value
}
