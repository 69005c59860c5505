import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

/// A low-priority job that runs until its task is escalated to `.high`, then records the
/// priority it runs at: the test hangs (and fails on its time limit) if nothing raises it.
private final class EscalationProbe: Sendable {
  let started = Gate()
  private let raised = Gate()
  private let seen = Mutex<TaskPriority?>(nil)

  var priority: TaskPriority? { seen.withLock { $0 } }

  /// The job's body: signals that it runs, waits to be raised, records its priority.
  func body() async throws {
    started.open()
    try await withTaskPriorityEscalationHandler {
      // An escalation that came before the handler was installed (between `started` and here)
      // is not reported to it: look at the priority once the handler is in place.
      if Task.currentPriority >= .high { raised.open() }
      try await raised.wait()
    } onPriorityEscalated: { [raised] _, new in
      // The test's own awaits (at medium priority) raise the job too: wait for the high one.
      if new >= .high { raised.open() }
    }
    let current = Task.currentPriority
    seen.withLock { $0 = current }
  }
}

/// Records the priority a job starts at.
private final class StartPriority: Sendable {
  private let seen = Mutex<TaskPriority?>(nil)
  var priority: TaskPriority? { seen.withLock { $0 } }
  func record() {
    let current = Task.currentPriority
    seen.withLock { $0 = current }
  }
}

@Suite("Priority escalation: a waiter raises the jobs ahead of it", .timeLimit(.minutes(1)))
struct PriorityEscalationTests {
  @Test("SerialQueue: a high enqueueAndWait raises the running low detached job")
  func serialEnqueueAndWait() async throws {
    let queue = SerialQueue()
    let probe = EscalationProbe()
    let running = queue.enqueueDetached(priority: .low) { try await probe.body() }
    try await probe.started.wait()
    let waiter = Task(priority: .high) { try await queue.enqueueAndWait {} }
    try await running.value
    try await waiter.value
    #expect(probe.priority.map { $0 >= .high } == true, "\(String(describing: probe.priority))")
  }

  @Test("SerialQueue: a high enqueue job waiting raises the running low enqueue job")
  func serialEnqueue() async throws {
    let queue = SerialQueue()
    let probe = EscalationProbe()
    let running = queue.enqueue(priority: .low) { try await probe.body() }
    try await probe.started.wait()
    let waiting = queue.enqueue(priority: .high) {}
    try await running.value
    try await waiting.value
    #expect(probe.priority.map { $0 >= .high } == true, "\(String(describing: probe.priority))")
  }

  @Test("SerialQueue: awaiting a pending detached job's value from a high task raises the line")
  func awaitingDetachedValue() async throws {
    let queue = SerialQueue()
    let probe = EscalationProbe()
    let running = queue.enqueueDetached(priority: .low) { try await probe.body() }
    let next = StartPriority()
    let pending = queue.enqueueDetached(priority: .low) { next.record() }
    try await probe.started.wait()
    let awaiter = Task(priority: .high) { try await pending.value }
    try await awaiter.value
    try await running.value
    #expect(probe.priority.map { $0 >= .high } == true)
    // The awaited job, still waiting when the high task came, starts raised too.
    #expect(next.priority.map { $0 >= .high } == true, "\(String(describing: next.priority))")
  }

  @Test("SerialQueue: a job waiting between the running one and a high waiter starts raised")
  func jobsAheadStartRaised() async throws {
    let queue = SerialQueue()
    let probe = EscalationProbe()
    let running = queue.enqueue(priority: .low) { try await probe.body() }
    let between = StartPriority()
    let middle = queue.enqueue(priority: .low) { between.record() }
    try await probe.started.wait()
    let waiter = Task(priority: .high) { try await queue.enqueueAndWait {} }
    try await waiter.value
    try await running.value
    try await middle.value
    #expect(between.priority.map { $0 >= .high } == true, "\(String(describing: between.priority))")
  }

  @Test("ConcurrentQueue: a high barrier waiting raises the running low job")
  func concurrentBarrier() async throws {
    let queue = ConcurrentQueue(limit: 2)
    let probe = EscalationProbe()
    let running = queue.enqueue(priority: .low) { try await probe.body() }
    try await probe.started.wait()
    let barrier = queue.enqueueBarrier(priority: .high) {}
    try await running.value
    try await barrier.value
    #expect(probe.priority.map { $0 >= .high } == true)
  }

  @Test("KeyedSerialQueue: a high waiter on a key raises that key's running low job")
  func keyed() async throws {
    let queue = KeyedSerialQueue<String>()
    let probe = EscalationProbe()
    let running = queue.enqueueDetached(forKey: "a", priority: .low) { try await probe.body() }
    try await probe.started.wait()
    let waiter = Task(priority: .high) { try await queue.enqueueAndWait(forKey: "a") {} }
    try await running.value
    try await waiter.value
    #expect(probe.priority.map { $0 >= .high } == true)
  }

  @Test(
    "the running job is raised by the time the enqueue call of a higher-priority job returns",
    arguments: ["barrier", "enqueue", "detached"]
  )
  func raisedAtAdmission(kind: String) async throws {
    let queue = ConcurrentQueue(limit: 1)
    let started = Gate()
    let release = Gate()
    let running = queue.enqueue(priority: .low) { () async throws -> TaskPriority in
      started.open()
      try await release.wait()
      return Task.currentPriority
    }
    try await started.wait()
    let waiting: QueuedTask<Void> =
      switch kind {
      case "barrier": queue.enqueueBarrier(priority: .high) {}
      case "enqueue": queue.enqueue(priority: .high) {}
      default: queue.enqueueDetached(priority: .high) {}
      }
    // No waiting for the new job's task to run: the raise happened inside the call.
    release.open()
    #expect(try await Task(priority: .low) { try await running.value }.value >= .high)
    try await waiting.value
  }
}
