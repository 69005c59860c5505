import Dispatch
import OrderlyCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The executor the executor rows give their queues: two threads, as many as the blocking jobs
/// that run at once.
let blockingExecutor = DedicatedThreadExecutor(name: "bench.blocking", threads: 2)

/// One executor for the 8-producer row's queue.
let producerRowExecutor = DedicatedThreadExecutor(name: "bench.runner")

/// Whether the blocking jobs are done, read by the ping tasks.
final class DoneFlag: Sendable {
  private let value = Atomic(false)
  var isSet: Bool { value.load(ordering: .relaxed) }
  func set() { value.store(true, ordering: .relaxed) }
}

/// What the ping tasks measured: each ping's wait to be scheduled again, in nanoseconds.
final class PingLatencies: Sendable {
  private let values = Mutex<[Double]>([])

  func add(_ value: Double) { values.withLock { $0.append(value) } }

  /// The given percentile (0 to 100) of the recorded latencies.
  func percentile(_ percent: Double) -> Double {
    let sorted = values.withLock { $0 }.sorted()
    guard !sorted.isEmpty else { return 0 }
    let index = min(sorted.count - 1, Int(Double(sorted.count) * percent / 100))
    return sorted[index]
  }
}

/// Measures how long 200 pinging tasks wait to run again while a queue of limit 2 runs `jobs`
/// jobs that each block their thread for 1 ms.
///
/// A ping yields and measures how long until it runs again, then sleeps 1 ms.
///
/// - Parameters:
///   - jobs: How many 1 ms blocking jobs the queue runs.
///   - executor: The queue's executor; `nil` runs the jobs on the cooperative pool.
///   - percentile: Which percentile of the ping latencies to return.
/// - Returns: The pings' latency at `percentile`, in nanoseconds.
func pingLatency(
  jobs: Int,
  executor: (any TaskExecutor)?,
  percentile: Double
) async -> Double {
  let queue = ConcurrentQueue(name: "blocking", limit: 2, executor: executor)
  let latencies = PingLatencies()
  let done = DoneFlag()
  for _ in 0..<jobs {
    queue.enqueueDetached { usleep(1_000) }
  }
  let clock = ContinuousClock()
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<200 {
      group.addTask {
        while !done.isSet {
          let start = clock.now
          await Task.yield()
          let waited = start.duration(to: clock.now)
          latencies.add(
            Double(waited.components.seconds) * 1e9 + Double(waited.components.attoseconds) / 1e9
          )
          try? await Task.sleep(for: .milliseconds(1))
        }
      }
    }
    group.addTask {
      try? await queue.waitUntilIdle()
      done.set()
    }
  }
  return latencies.percentile(percentile)
}

/// The rows that put a queue on a task executor.
public let executorScenarios: [Scenario] = [
  Scenario(
    name: "ping p50 beside 1 ms blocking jobs: executor vs pool",
    baselineName: "the same jobs on the cooperative pool",
    unit: .nanoseconds,
    target: .info,
    jobs: (2_000, 400),
    orderly: { jobs in
      await pingLatency(jobs: jobs, executor: blockingExecutor, percentile: 50)
    },
    baseline: { jobs in await pingLatency(jobs: jobs, executor: nil, percentile: 50) }
  ),
  Scenario(
    name: "ping p99 beside 1 ms blocking jobs: executor vs pool",
    baselineName: "the same jobs on the cooperative pool",
    unit: .nanoseconds,
    target: .info,
    jobs: (2_000, 400),
    orderly: { jobs in
      await pingLatency(jobs: jobs, executor: blockingExecutor, percentile: 99)
    },
    baseline: { jobs in await pingLatency(jobs: jobs, executor: nil, percentile: 99) }
  ),
  Scenario(
    name: "8 producers × enqueueDetached, queue on its own executor",
    baselineName: "8 producers × DispatchQueue.async",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (1_000_000, 100_000),
    orderly: { jobs in
      await eightProducers(jobs, on: SerialQueue(executor: producerRowExecutor))
    },
    baseline: eightProducersOnDispatch
  ),
]
