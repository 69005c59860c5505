import OrderlyTestSupport
import Testing

@testable import OrderlyCore

@Suite("SerialQueue and ConcurrentQueue(limit: 1): introspection")
struct SerialQueueIntrospectionTests {
  @Test("name, pendingCount and isIdle follow the line", arguments: QueueKind.allCases)
  func counts(kind: QueueKind) async throws {
    let queue = kind.make(name: "inbox")
    #expect(queue.name == "inbox")
    #expect(queue.isIdle && queue.pendingCount == 0)
    let release = Gate()
    let started = Gate()
    queue.enqueueDetached {
      started.open()
      try await release.wait()
    }
    queue.enqueue {}
    queue.enqueueDetached {}
    try await started.wait()
    #expect(!queue.isIdle)
    #expect(queue.pendingCount == 2)
    release.open()
    try await queue.waitUntilIdle()
    #expect(queue.isIdle && queue.pendingCount == 0)
  }

  @Test(
    "waitUntilIdle returns once earlier jobs end; later jobs do not delay it",
    arguments: QueueKind.allCases
  )
  func waitUntilIdleScope(kind: QueueKind) async throws {
    let queue = kind.make()
    let log = OrderedRecorder<String>()
    let firstRelease = Gate()
    let laterRelease = Gate()
    queue.enqueueDetached {
      try await firstRelease.wait()
      log.record("first")
    }
    let waiter = Task {
      try await queue.waitUntilIdle()
      log.record("idle")
    }
    // The waiter takes its place synchronously inside its task; wait until it has.
    while queue.core.idleWaiterCount < 1 { await Task.yield() }
    queue.enqueueDetached {
      try await laterRelease.wait()
      log.record("later")
    }
    firstRelease.open()
    try await waiter.value
    #expect(log.values == ["first", "idle"])
    laterRelease.open()
    try await queue.waitUntilIdle()
    #expect(log.values == ["first", "idle", "later"])
  }

  @Test(
    "waitUntilIdle on an idle queue returns at once; a cancelled waiter leaves at once",
    arguments: QueueKind.allCases
  )
  func waitUntilIdleEdges(kind: QueueKind) async throws {
    let queue = kind.make()
    try await queue.waitUntilIdle()
    let started = Gate()
    queue.enqueueDetached {
      started.open()
      try await Gate().wait()
    }
    try await started.wait()
    let waiter = Task { try await queue.waitUntilIdle() }
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
    queue.cancelAll()
    try await queue.waitUntilIdle()
  }

  @Test(
    "events report every step of every job, in order, with names and rising timestamps",
    arguments: QueueKind.allCases
  )
  func eventsInOrder(kind: QueueKind) async throws {
    let queue = kind.make(name: "events")
    var iterator = queue.events.makeAsyncIterator()
    let release = Gate()
    queue.enqueueDetached(name: "a") { try await release.wait() }
    let failing = queue.enqueue(name: "b") { () throws -> Int in throw TestError(code: 1) }
    let cancelled = queue.enqueueDetached(name: "c") {}
    cancelled.cancel()
    queue.enqueue(name: "d") {}
    release.open()
    try await queue.waitUntilIdle()
    _ = await failing.result
    var lines: [String] = []
    var previous: ContinuousClock.Instant?
    while lines.count < 10, let event = await iterator.next() {
      lines.append(event.description)
      #expect(event.queueName == "events")
      if let previous { #expect(previous <= event.timestamp) }
      previous = event.timestamp
    }
    #expect(
      lines == [
        "events #1 (a) enqueued", "events #1 (a) started",
        "events #2 (b) enqueued", "events #3 (c) enqueued", "events #3 (c) cancelled",
        "events #4 (d) enqueued", "events #1 (a) finished",
        "events #2 (b) started", "events #2 (b) failed(TestError(code: 1))",
        "events #4 (d) started",
      ]
    )
  }

  @Test(
    "two listeners each get every event; a dropped listener stops receiving",
    arguments: QueueKind.allCases
  )
  func independentListeners(kind: QueueKind) async throws {
    let queue = kind.make()
    var first = queue.events.makeAsyncIterator()
    do {
      let dropped = queue.events
      _ = dropped
    }
    var second = queue.events.makeAsyncIterator()
    try await queue.enqueueAndWait(name: "x") {}
    for _ in 0..<3 {
      let a = await first.next()
      let b = await second.next()
      #expect(a?.description == b?.description)
    }
  }
}

@Suite("SerialQueue and ConcurrentQueue(limit: 1): lifetime")
struct SerialQueueLifetimeTests {
  @Test(
    "dropping the last reference to a queue drops no job; its events end after the last",
    arguments: QueueKind.allCases
  )
  func jobsOutliveQueueReference(kind: QueueKind) async throws {
    let log = OrderedRecorder<Int>()
    let release = Gate()
    let events: AsyncStream<QueueEvent>
    do {
      let queue = kind.make()
      events = queue.events
      queue.enqueueDetached { try await release.wait() }
      for index in 0..<5 {
        if index.isMultiple(of: 2) {
          queue.enqueue { log.record(index) }
        } else {
          queue.enqueueDetached { log.record(index) }
        }
      }
    }
    release.open()
    try await log.waitForCount(5)
    #expect(log.values == [0, 1, 2, 3, 4])
    var finished = 0
    for await event in events {
      if case .finished = event.kind { finished += 1 }
    }
    // The sequence ended by itself, once the last job had finished and freed the queue.
    #expect(finished == 6)
  }
}
