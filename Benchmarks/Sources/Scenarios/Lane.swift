import OrderlyCore

/// `jobs` no-op `execute` closures from one producer, until the queue has drained.
@Sendable func laneUntilDrained(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = SerialQueue()
    for _ in 0..<jobs { queue.execute {} }
    try? await queue.waitUntilIdle()
  }
}

/// The runner's work per `execute` closure: `jobs` no-op closures wait behind a held job, and
/// the time runs from releasing it until the queue is idle.
@Sendable func laneRunnerSide(_ jobs: Int) async -> Double {
  let (queue, release) = await blockedQueue()
  for _ in 0..<jobs { queue.execute {} }
  return await nanosecondsPerJob(jobs) {
    release()
    try? await queue.waitUntilIdle()
  }
}

/// Bytes per pending `execute` closure: `jobs` no-op closures enqueued behind a held job.
@Sendable func pendingLaneBytes(_ jobs: Int) async -> Double {
  let (queue, release) = await blockedQueue()
  let before = allocatedBytes()
  for _ in 0..<jobs { queue.execute {} }
  let after = allocatedBytes()
  release()
  try? await queue.waitUntilIdle()
  return Double(after - before) / Double(jobs)
}

/// Eight producer tasks enqueue `jobs` no-op `execute` closures between them; until the queue
/// drains.
@Sendable func eightLaneProducers(_ jobs: Int) async -> Double {
  await nanosecondsPerJob(jobs) {
    let queue = SerialQueue()
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask { for _ in 0..<(jobs / 8) { queue.execute {} } }
      }
    }
    try? await queue.waitUntilIdle()
  }
}

/// The rows of `execute(_:)`, the lane for work with no handle: Dispatch's own costs are the
/// targets.
public let laneScenarios: [Scenario] = [
  Scenario(
    name: "execute (no handle), until drained",
    baselineName: "DispatchQueue.async (serial)",
    unit: .nanosecondsPerJob,
    target: .ratio(1.2),
    jobs: (1_000_000, 100_000),
    orderly: laneUntilDrained,
    baseline: dispatchUntilDrained
  ),
  Scenario(
    name: "8 producers × execute (no handle)",
    baselineName: "8 producers × DispatchQueue.async",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: eightLaneProducers,
    baseline: eightProducersOnDispatch
  ),
  Scenario(
    name: "execute (no handle), runner side (already queued)",
    baselineName: "a suspended DispatchQueue draining",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: laneRunnerSide,
    baseline: suspendedDispatchDraining
  ),
  Scenario(
    name: "memory per pending job (execute, no handle)",
    baselineName: "target: bytes",
    unit: .bytesPerJob,
    target: .absolute(64),
    jobs: (1_000_000, 100_000),
    orderly: pendingLaneBytes,
    baseline: nil
  ),
]
