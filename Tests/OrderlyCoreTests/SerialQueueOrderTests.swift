import OrderlyCore
import OrderlyTestSupport
import Testing

@Suite("SerialQueue and ConcurrentQueue(limit: 1): order")
struct SerialQueueOrderTests {
  @Test(
    "jobs start in enqueue order and each ends before the next starts, across suspensions",
    arguments: QueueKind.allCases
  )
  func startAndEndInOrder(kind: QueueKind) async throws {
    struct Step: Equatable {
      let job: Int
      let isStart: Bool
    }
    let queue = kind.make(name: "order")
    let log = OrderedRecorder<Step>()
    for index in 0..<60 {
      let job: @Sendable () async -> Void = {
        log.record(Step(job: index, isStart: true))
        for _ in 0..<(index % 4) { await Task.yield() }
        log.record(Step(job: index, isStart: false))
      }
      if index.isMultiple(of: 2) {
        queue.enqueue(operation: job)
      } else {
        queue.enqueueDetached(operation: job)
      }
    }
    try await log.waitForCount(120)
    let expected = (0..<60).flatMap {
      [Step(job: $0, isStart: true), Step(job: $0, isStart: false)]
    }
    #expect(log.values == expected)
  }

  @Test(
    "concurrent enqueueAndWait callers run in the order their calls took their place",
    arguments: QueueKind.allCases
  )
  func enqueueAndWaitOrder(kind: QueueKind) async throws {
    let queue = kind.make()
    let events = queue.events
    let ran = OrderedRecorder<String>()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for index in 0..<50 {
        group.addTask {
          try await queue.enqueueAndWait(name: "\(index)") {
            ran.record("\(index)")
            await Task.yield()
          }
        }
      }
      try await group.waitForAll()
    }
    var enqueued: [String] = []
    var started: [String] = []
    for await event in events {
      switch event.kind {
      case .enqueued: enqueued.append(event.jobName ?? "")
      case .started: started.append(event.jobName ?? "")
      default: break
      }
      if started.count == 50 { break }
    }
    #expect(enqueued.count == 50)
    #expect(started == enqueued)
    #expect(ran.values == enqueued)
  }

  @Test(
    "the next job waits until the running job has finished, not just suspended",
    arguments: QueueKind.allCases
  )
  func nextWaitsForFinish(kind: QueueKind) async throws {
    let queue = kind.make()
    let started = Gate()
    let release = Gate()
    let log = OrderedRecorder<Int>()
    queue.enqueueDetached {
      log.record(1)
      started.open()
      try await release.wait()
      log.record(2)
    }
    queue.enqueue { log.record(3) }
    try await started.wait()
    #expect(queue.pendingCount == 1)
    #expect(log.values == [1])
    release.open()
    try await log.waitForCount(3)
    #expect(log.values == [1, 2, 3])
  }

  @Test(
    "calls from one synchronous producer keep program order for every submission kind",
    arguments: QueueKind.allCases
  )
  @MainActor
  func programOrderFromMainActor(kind: QueueKind) async throws {
    let queue = kind.make()
    let log = OrderedRecorder<Int>()
    var handles: [QueuedTask<Void>] = []
    for index in 0..<200 {
      if index.isMultiple(of: 2) {
        handles.append(queue.enqueue { log.record(index) })
      } else {
        handles.append(queue.enqueueDetached { log.record(index) })
      }
    }
    for handle in handles { try await handle.value }
    #expect(log.values == Array(0..<200))
  }

  @Test("job identifiers follow the order of the line", arguments: QueueKind.allCases)
  func identifiersFollowLine(kind: QueueKind) async throws {
    let queue = kind.make()
    let first = queue.enqueue { 1 }
    let second = queue.enqueueDetached { 2 }
    let third = queue.enqueue { 3 }
    #expect(first.id < second.id && second.id < third.id)
    #expect(first.id == JobID(rawValue: 1))
    #expect(try await [first.value, second.value, third.value] == [1, 2, 3])
  }

  @Test(
    "jobs submitted while the line is busy are numbered, reported and counted in order",
    arguments: QueueKind.allCases
  )
  func busyLineAdmissions(kind: QueueKind) async throws {
    let queue = kind.make(name: "busy")
    let events = queue.events
    let gate = Gate()
    let first = queue.enqueueDetached { try await gate.wait() }
    var handles: [QueuedTask<Void>] = []
    for index in 0..<20 {
      if index.isMultiple(of: 5) {
        handles.append(queue.enqueue(name: "\(index)") {})
      } else {
        handles.append(queue.enqueueDetached(name: "\(index)") {})
      }
    }
    #expect(handles.map(\.id.rawValue) == Array(2...21).map(UInt64.init))
    #expect(queue.pendingCount == 20)
    handles[3].cancel()
    #expect(queue.pendingCount == 19)
    gate.open()
    try await first.value
    try await queue.waitUntilIdle()
    var enqueued: [UInt64] = []
    var started: [String] = []
    for await event in events {
      switch event.kind {
      case .enqueued: enqueued.append(event.jobID.rawValue)
      case .started: started.append(event.jobName ?? "first")
      default: break
      }
      if started.count == 20 { break }
    }
    #expect(enqueued == Array(1...21).map(UInt64.init))
    #expect(started == ["first"] + (0..<20).filter { $0 != 3 }.map { "\($0)" })
    await #expect(throws: CancellationError.self) { try await handles[3].value }
  }
}
