import AsyncAlgorithms
import Dispatch
import Foundation
import OrderlyCore
import Synchronization

/// What a scenario's number means.
public enum MetricUnit: String, Sendable {
  case nanosecondsPerJob = "ns/job"
  case bytesPerJob = "B/job"
  case seconds = "s"
  case nanoseconds = "ns"
}

/// One row of the ratios table: an Orderly workload, what it is compared with, and the target.
public struct Scenario: Sendable {
  /// How the Orderly number is judged.
  public enum Target: Sendable {
    /// Orderly ÷ baseline must be at most this.
    case ratio(Double)
    /// The Orderly number itself must be at most this.
    case absolute(Double)
    /// Shown for comparison; no target.
    case info
    /// Not measurable yet; the reason is shown.
    case pending(String)
  }

  /// What Orderly does, as shown in the table.
  public let name: String
  /// What it is compared with.
  public let baselineName: String
  /// What the numbers measure.
  public let unit: MetricUnit
  /// How the Orderly number is judged.
  public let target: Target
  /// Job counts for a full run and a quick one.
  public let jobs: (full: Int, quick: Int)
  /// Runs the Orderly side with a job count and returns its number.
  public let orderly: @Sendable (Int) async throws -> Double
  /// Runs the baseline with a job count and returns its number; `nil` for absolute targets.
  public let baseline: (@Sendable (Int) async throws -> Double)?
}

/// Whether `Scripts/count-instructions` runs this process: it sets this variable and counts
/// the instructions between two raised `SIGTRAP`s.
private let marksInstructionRegions =
  ProcessInfo.processInfo.environment["ORDERLY_INSTRUCTION_MARKERS"] == "1"

/// Tells `Scripts/count-instructions` that a measured body starts or ends; nothing otherwise.
func markInstructionRegion() {
  if marksInstructionRegions { raise(SIGTRAP) }
}

/// Runs `body` and returns its time per job in nanoseconds.
func nanosecondsPerJob(
  _ jobs: Int,
  isolation: isolated (any Actor)? = #isolation,
  _ body: () async throws -> Void
) async rethrows -> Double {
  let clock = ContinuousClock()
  markInstructionRegion()
  let start = clock.now
  try await body()
  let elapsed = start.duration(to: clock.now)
  markInstructionRegion()
  let nanoseconds =
    Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
  return nanoseconds / Double(jobs)
}

/// A queue held busy by a first job until `release` is called.
func blockedQueue() async -> (SerialQueue, @Sendable () -> Void) {
  let queue = SerialQueue(name: "blocked")
  let latch = Latch(capacity: 1)
  queue.enqueueDetached { await latch.wait() }
  return (queue, { latch.open() })
}

/// Gives freshly created tasks time to reach their first suspension before memory is read.
func settle() async {
  try? await Task.sleep(for: .milliseconds(300))
}

/// Eight producer tasks enqueue `jobs` no-op detached jobs between them; until the queue drains.
///
/// - Parameters:
///   - jobs: How many jobs in all.
///   - queue: The queue they enqueue on.
/// - Returns: Nanoseconds per job.
func eightProducers(_ jobs: Int, on queue: SerialQueue) async -> Double {
  await nanosecondsPerJob(jobs) {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask { for _ in 0..<(jobs / 8) { queue.enqueueDetached {} } }
      }
    }
    try? await queue.waitUntilIdle()
  }
}

/// The same with `DispatchQueue.async` on one serial queue, until it drains.
///
/// - Parameter jobs: How many jobs in all.
/// - Returns: Nanoseconds per job.
@Sendable func eightProducersOnDispatch(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = DispatchQueue(label: "baseline.serial")
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask { for _ in 0..<(jobs / 8) { queue.async {} } }
      }
    }
    await drain(queue)
  }
}

/// `jobs` no-op synchronous `enqueueDetached` jobs from one producer, until the queue has
/// drained.
@Sendable func detachedUntilDrained(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = SerialQueue()
    for _ in 0..<jobs { queue.enqueueDetached {} }
    try? await queue.waitUntilIdle()
  }
}

/// The same with async jobs (`{ () async in }`), which the runner awaits one by one.
@Sendable func asyncDetachedUntilDrained(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = SerialQueue()
    for _ in 0..<jobs { queue.enqueueDetached { () async in } }
    try? await queue.waitUntilIdle()
  }
}

/// The runner's work per job: `jobs` no-op detached jobs wait behind a held job, and the time
/// runs from releasing it until the queue is idle.
///
/// - Parameters:
///   - jobs: How many jobs.
///   - synchronous: Whether the jobs are synchronous closures or async ones.
/// - Returns: Nanoseconds per job.
func runnerSide(_ jobs: Int, synchronous: Bool) async -> Double {
  let (queue, release) = await blockedQueue()
  if synchronous {
    for _ in 0..<jobs { queue.enqueueDetached {} }
  } else {
    for _ in 0..<jobs { queue.enqueueDetached { () async in } }
  }
  return await nanosecondsPerJob(jobs) {
    release()
    try? await queue.waitUntilIdle()
  }
}

/// Bytes per pending detached job: `jobs` no-op jobs enqueued behind a held job.
///
/// - Parameters:
///   - jobs: How many jobs.
///   - synchronous: Whether the jobs are synchronous closures or async ones.
/// - Returns: Bytes in use per pending job.
func pendingDetachedBytes(_ jobs: Int, synchronous: Bool) async -> Double {
  let (queue, release) = await blockedQueue()
  let before = allocatedBytes()
  if synchronous {
    for _ in 0..<jobs { queue.enqueueDetached {} }
  } else {
    for _ in 0..<jobs { queue.enqueueDetached { () async in } }
  }
  let after = allocatedBytes()
  release()
  try? await queue.waitUntilIdle()
  return Double(after - before) / Double(jobs)
}

/// A suspended `DispatchQueue` with `jobs` no-op blocks, from its resumption until it drains.
@Sendable func suspendedDispatchDraining(_ jobs: Int) async -> Double {
  let queue = DispatchQueue(label: "baseline.serial")
  queue.suspend()
  for _ in 0..<jobs { queue.async {} }
  return await nanosecondsPerJob(jobs) {
    queue.resume()
    await drain(queue)
  }
}

/// `jobs` no-op `enqueue` jobs from one producer, until the queue has drained.
@Sendable func enqueuedUntilDrained(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = SerialQueue()
    for _ in 0..<jobs { queue.enqueue {} }
    try? await queue.waitUntilIdle()
  }
}

/// `jobs` no-op blocks on a serial `DispatchQueue` from one producer, until it has drained.
@Sendable func dispatchUntilDrained(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = DispatchQueue(label: "baseline.serial")
    for _ in 0..<jobs { queue.async {} }
    await drain(queue)
  }
}

/// `jobs` no-op detached jobs at `.medium`, admitted behind a first job of priority `first`
/// that holds the queue until all of them are in line; until the queue has drained.
///
/// Behind a `.low` job every admission raises the jobs ahead of it: this row keeps that linear
/// (it walked the whole line at every admission once, quadratic: 4,000 admissions took 2.4 s).
@Sendable func admittedBehind(_ jobs: Int, firstAt first: TaskPriority) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = SerialQueue()
    let latch = Latch(capacity: 1)
    queue.enqueueDetached(priority: first) { await latch.wait() }
    for _ in 0..<jobs { queue.enqueueDetached(priority: .medium) {} }
    latch.open()
    try? await queue.waitUntilIdle()
  }
}

/// Every row of the ratios table, in the order printed.
public let scenarios: [Scenario] = [
  Scenario(
    name: "enqueueDetached, synchronous jobs, until drained",
    baselineName: "DispatchQueue.async (serial)",
    unit: .nanosecondsPerJob,
    target: .ratio(1.5),
    jobs: (1_000_000, 100_000),
    orderly: detachedUntilDrained,
    baseline: dispatchUntilDrained
  ),
  Scenario(
    name: "enqueueDetached, async jobs, until drained",
    baselineName: "DispatchQueue.async (serial)",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: asyncDetachedUntilDrained,
    baseline: dispatchUntilDrained
  ),
  Scenario(
    name: "enqueue fire-and-forget (inherits context)",
    baselineName: "bare Task {} created and completed",
    unit: .nanosecondsPerJob,
    target: .ratio(1.5),
    jobs: (100_000, 20_000),
    orderly: enqueuedUntilDrained,
    baseline: { jobs in
      await nanosecondsPerJob(jobs) {
        let countdown = Countdown(jobs)
        for _ in 0..<jobs { Task { countdown.tick() } }
        await countdown.wait()
      }
    }
  ),
  Scenario(
    name: "enqueueAndWait round trip, uncontended",
    baselineName: "the serial task executor article's SerialQueue3",
    unit: .nanosecondsPerJob,
    target: .ratio(0.25),
    jobs: (100_000, 20_000),
    orderly: { jobs in
      try await nanosecondsPerJob(jobs) {
        let queue = SerialQueue()
        for _ in 0..<jobs { try await queue.enqueueAndWait {} }
      }
    },
    baseline: { jobs in
      try await nanosecondsPerJob(jobs) {
        let queue = Seed000SerialQueue()
        for _ in 0..<jobs { try await queue.enqueue {} }
      }
    }
  ),
  Scenario(
    name: "8 producers × enqueueDetached",
    baselineName: "8 producers × DispatchQueue.async",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in await eightProducers(jobs, on: SerialQueue()) },
    baseline: eightProducersOnDispatch
  ),
  Scenario(
    name: "memory per pending job (enqueueDetached)",
    baselineName: "target: bytes",
    unit: .bytesPerJob,
    target: .absolute(200),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in await pendingDetachedBytes(jobs, synchronous: true) },
    baseline: nil
  ),
  Scenario(
    name: "memory per pending job (enqueueDetached, async job)",
    baselineName: "target: bytes",
    unit: .bytesPerJob,
    target: .absolute(200),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in await pendingDetachedBytes(jobs, synchronous: false) },
    baseline: nil
  ),
  Scenario(
    name: "memory per pending job (enqueue)",
    baselineName: "suspended bare Task",
    unit: .bytesPerJob,
    target: .ratio(1.2),
    jobs: (100_000, 20_000),
    orderly: { jobs in
      let (queue, release) = await blockedQueue()
      let before = allocatedBytes()
      for _ in 0..<jobs { queue.enqueue {} }
      await settle()
      let after = allocatedBytes()
      release()
      try? await queue.waitUntilIdle()
      return Double(after - before) / Double(jobs)
    },
    baseline: { jobs in
      let latch = Latch(capacity: jobs)
      let countdown = Countdown(jobs)
      let before = allocatedBytes()
      for _ in 0..<jobs {
        Task {
          await latch.wait()
          countdown.tick()
        }
      }
      await settle()
      let after = allocatedBytes()
      latch.open()
      await countdown.wait()
      return Double(after - before) / Double(jobs)
    }
  ),
  Scenario(
    name: "cancelAll() with pending jobs, every awaiter resumed",
    baselineName: "target: seconds",
    unit: .seconds,
    target: .absolute(0.5),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in
      let (queue, release) = await blockedQueue()
      var handles: [QueuedTask<Void>] = []
      handles.reserveCapacity(jobs)
      for _ in 0..<jobs { handles.append(queue.enqueueDetached {}) }
      // 1,000 tasks are already waiting on jobs spread over the line when cancelAll() runs.
      let stride = max(1, jobs / 1_000)
      let waiters = Countdown(jobs / stride)
      for index in Swift.stride(from: 0, to: jobs, by: stride) {
        let handle = handles[index]
        Task {
          if case .failure(let error) = await handle.result, error is CancellationError {
            waiters.tick()
          }
        }
      }
      let clock = ContinuousClock()
      let start = clock.now
      queue.cancelAll()
      await waiters.wait()
      let elapsed = start.duration(to: clock.now)
      var resumed = 0
      for handle in handles {
        if case .failure(let error) = await handle.result, error is CancellationError {
          resumed += 1
        }
      }
      release()
      guard resumed == jobs else { throw ScenarioFailure("only \(resumed) of \(jobs) cancelled") }
      return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    },
    baseline: nil
  ),
  Scenario(
    name: "ConcurrentQueue(limit: 4), no-op jobs",
    baselineName: "TaskGroup gated by a semaphore",
    unit: .nanosecondsPerJob,
    target: .ratio(1),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in
      await nanosecondsPerJob(jobs) {
        let queue = ConcurrentQueue(limit: 4)
        for _ in 0..<jobs { queue.enqueueDetached {} }
        try? await queue.waitUntilIdle()
      }
    },
    baseline: { jobs in
      await nanosecondsPerJob(jobs) {
        let semaphore = BaselineSemaphore(value: 4)
        await withTaskGroup(of: Void.self) { group in
          for _ in 0..<jobs {
            await semaphore.wait()
            group.addTask { semaphore.signal() }
          }
        }
      }
    }
  ),
  Scenario(
    name: "KeyedSerialQueue, 1k keys × 1k jobs",
    baselineName: "SerialQueue.enqueueDetached",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in
      await nanosecondsPerJob(jobs) {
        let queue = KeyedSerialQueue<Int>()
        for index in 0..<jobs { queue.enqueueDetached(forKey: index % 1_000) {} }
        try? await queue.waitUntilIdle()
      }
    },
    baseline: detachedUntilDrained
  ),
  Scenario(
    name: "KeyedSerialQueue memory kept after distinct keys, one after another",
    baselineName: "target: bytes per key",
    unit: .bytesPerJob,
    target: .absolute(1),
    jobs: (1_000_000, 100_000),
    orderly: { keys in
      let queue = KeyedSerialQueue<Int>()
      // Warm up so the first line's one-time allocations are not counted.
      try await queue.enqueueAndWait(forKey: -1) {}
      let before = allocatedBytes()
      for key in 0..<keys { try await queue.enqueueAndWait(forKey: key) {} }
      let after = allocatedBytes()
      guard queue.busyKeyCount == 0 else {
        throw ScenarioFailure("\(queue.busyKeyCount) key lines still held")
      }
      return Double(max(0, after - before)) / Double(keys)
    },
    baseline: nil
  ),
  Scenario(
    name: "enqueueDetached returning Int (not pre-specialized)",
    baselineName: "DispatchQueue.async (serial)",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (1_000_000, 100_000),
    orderly: { jobs in
      await nanosecondsPerJob(jobs) {
        let queue = SerialQueue()
        for index in 0..<jobs { queue.enqueueDetached { index } }
        try? await queue.waitUntilIdle()
      }
    },
    baseline: dispatchUntilDrained
  ),
  Scenario(
    name: "enqueueDetached, producer side (queue held)",
    baselineName: "DispatchQueue.async on a suspended queue",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (1_000_000, 100_000),
    orderly: { jobs in
      let (queue, release) = await blockedQueue()
      let time = await nanosecondsPerJob(jobs) {
        for _ in 0..<jobs { queue.enqueueDetached {} }
      }
      release()
      try? await queue.waitUntilIdle()
      return time
    },
    baseline: { jobs in
      let queue = DispatchQueue(label: "baseline.serial")
      queue.suspend()
      let time = await nanosecondsPerJob(jobs) {
        for _ in 0..<jobs { queue.async {} }
      }
      queue.resume()
      await drain(queue)
      return time
    }
  ),
  Scenario(
    name: "runner side, synchronous jobs (already queued)",
    baselineName: "a suspended DispatchQueue draining",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in await runnerSide(jobs, synchronous: true) },
    baseline: suspendedDispatchDraining
  ),
  Scenario(
    name: "runner side, async jobs (already queued)",
    baselineName: "a suspended DispatchQueue draining",
    unit: .nanosecondsPerJob,
    target: .ratio(4),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in await runnerSide(jobs, synchronous: false) },
    baseline: suspendedDispatchDraining
  ),
  Scenario(
    name: "enqueueDetached vs single-consumer AsyncStream",
    baselineName: "AsyncStream, one consumer",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (1_000_000, 100_000),
    orderly: detachedUntilDrained,
    baseline: { jobs in
      await nanosecondsPerJob(jobs) {
        let (stream, continuation) = AsyncStream.makeStream(of: (@Sendable () -> Void).self)
        let consumer = Task { for await job in stream { job() } }
        for _ in 0..<jobs { continuation.yield {} }
        continuation.finish()
        await consumer.value
      }
    }
  ),
  Scenario(
    name: "enqueueDetached vs AsyncChannel pipeline",
    baselineName: "AsyncChannel (send awaits the consumer)",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (100_000, 20_000),
    orderly: detachedUntilDrained,
    baseline: { jobs in
      await nanosecondsPerJob(jobs) {
        let channel = AsyncChannel<@Sendable () -> Void>()
        let consumer = Task { for await job in channel { job() } }
        for _ in 0..<jobs { await channel.send {} }
        channel.finish()
        await consumer.value
      }
    }
  ),
  Scenario(
    name: "enqueueAndWait round trip, caller at .high",
    baselineName: "the same round trip, caller at .medium",
    unit: .nanosecondsPerJob,
    target: .ratio(1.05),
    jobs: (100_000, 20_000),
    orderly: { jobs in try await roundTrips(jobs, at: .high) },
    baseline: { jobs in try await roundTrips(jobs, at: .medium) }
  ),
  Scenario(
    name: "enqueueAndWait behind a pending .low job (escalates it)",
    baselineName: "the same behind a pending .high job",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (100_000, 20_000),
    orderly: { jobs in try await roundTripsBehind(jobs, pendingAt: .low) },
    baseline: { jobs in try await roundTripsBehind(jobs, pendingAt: .high) }
  ),
  Scenario(
    name: "enqueueDetached at .medium behind a pending .low job (each admission escalates)",
    baselineName: "the same behind a pending .medium job",
    unit: .nanosecondsPerJob,
    target: .ratio(4),
    jobs: (100_000, 20_000),
    orderly: { jobs in await admittedBehind(jobs, firstAt: .low) },
    baseline: { jobs in await admittedBehind(jobs, firstAt: .medium) }
  ),
  Scenario(
    name: "enqueue vs previous-task chaining",
    baselineName: "a previous-task chain (the Q&A thread's)",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (100_000, 20_000),
    orderly: enqueuedUntilDrained,
    baseline: { jobs in
      await nanosecondsPerJob(jobs) {
        let chain = Seed002TaskChain()
        for _ in 0..<jobs { await chain.add {} }
        await chain.waitForLast()
      }
    }
  ),
]

/// A scenario that could not check what it measured.
public struct ScenarioFailure: Error, CustomStringConvertible {
  /// What went wrong.
  public let description: String

  /// A failure described by `description`.
  public init(_ description: String) {
    self.description = description
  }
}

/// Uncontended `enqueueAndWait` round trips from a task at `priority`: the escalation check runs
/// on every call and finds nothing to raise.
func roundTrips(_ jobs: Int, at priority: TaskPriority) async throws -> Double {
  try await Task(priority: priority) {
    try await nanosecondsPerJob(jobs) {
      let queue = SerialQueue()
      for _ in 0..<jobs { try await queue.enqueueAndWait {} }
    }
  }.value
}

/// Round trips from a `.high` task, each behind a detached job enqueued at `pendingAt`: at
/// `.low`, every call raises the job ahead of it.
func roundTripsBehind(_ jobs: Int, pendingAt priority: TaskPriority) async throws -> Double {
  try await Task(priority: .high) {
    try await nanosecondsPerJob(jobs) {
      let queue = SerialQueue()
      for _ in 0..<jobs {
        queue.enqueueDetached(priority: priority) {}
        try await queue.enqueueAndWait {}
      }
    }
  }.value
}
