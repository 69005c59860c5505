import OrderlyCore
import OrderlyTestSupport
import Testing

/// An actor whose methods enqueue jobs isolated to it, so that its own synchronous code and the
/// jobs it enqueues cannot interleave: a job that ran inside the `enqueue` call would record
/// itself before the caller records that the call returned.
private actor Caller {
  let log = OrderedRecorder<String>()

  func enqueueBehind(_ blocker: Gate?, on queue: TestQueue, round: Int) -> QueuedTask<Void> {
    if let blocker { queue.enqueue { try? await blocker.wait() } }
    let job = queue.enqueue { self.log.record("job \(round) ran") }
    log.record("enqueue \(round) returned")
    return job
  }
}

@Suite("enqueue behind a busy line: one scheduling, and never job code inside the call")
struct EnqueueBehindBusyLineTests {
  @Test(
    "a job enqueued behind a busy line runs after the call returned",
    arguments: QueueKind.allCases
  )
  func notInsideTheCall(kind: QueueKind) async throws {
    let queue = kind.make()
    let caller = Caller()
    let gate = Gate()
    let job = await caller.enqueueBehind(gate, on: queue, round: 0)
    gate.open()
    try await job.value
    #expect(caller.log.values == ["enqueue 0 returned", "job 0 ran"])
  }

  @Test(
    "the line frees itself while the job is being admitted: still after the call, 300 rounds",
    arguments: QueueKind.allCases
  )
  func racingTheLine(kind: QueueKind) async throws {
    let queue = kind.make()
    let caller = Caller()
    var jobs: [QueuedTask<Void>] = []
    for round in 0..<300 {
      // A short job ahead: the line may free itself at any moment of the next call.
      queue.enqueueDetached { await Task.yield() }
      jobs.append(await caller.enqueueBehind(nil, on: queue, round: round))
    }
    for job in jobs { try await job.value }
    let log = caller.log.values
    for round in 0..<300 {
      let returned = log.firstIndex(of: "enqueue \(round) returned")
      let ran = log.firstIndex(of: "job \(round) ran")
      #expect(returned != nil && ran != nil && returned! < ran!, "round \(round): \(log)")
    }
  }

  @Test(
    "a job enqueued behind a busy line inherits task-locals, priority and the caller's actor",
    arguments: QueueKind.allCases
  )
  func inheritsBehindBusyLine(kind: QueueKind) async throws {
    let queue = kind.make()
    let gate = Gate()
    queue.enqueueDetached { try? await gate.wait() }
    let job = await Task(priority: .high) {
      Trace.$label.withValue("behind") {
        queue.enqueue { (Trace.label, Task.currentPriority) }
      }
    }.value
    gate.open()
    let (label, priority) = try await job.value
    #expect(label == "behind")
    #expect(priority >= .high)
    let account = Account()
    let blocker = Gate()
    queue.enqueueDetached { try? await blocker.wait() }
    let first = await account.deposit(5, through: queue)
    let second = await account.deposit(7, through: queue)
    blocker.open()
    #expect(try await first.value == 5)
    #expect(try await second.value == 12)
  }

  @Test(
    "a job cancelled while it waits behind a busy line never runs",
    arguments: QueueKind.allCases
  )
  func cancelledBehind(kind: QueueKind) async throws {
    let queue = kind.make()
    let gate = Gate()
    queue.enqueueDetached { try? await gate.wait() }
    let ran = OrderedRecorder<Int>()
    let job = queue.enqueue { ran.record(1) }
    job.cancel()
    gate.open()
    #expect(await endsCancelled(job))
    try await queue.waitUntilIdle()
    #expect(ran.values.isEmpty)
  }
}
