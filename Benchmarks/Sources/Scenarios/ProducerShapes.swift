import Dispatch
import Foundation
import OrderlyCore
import Synchronization

/// Indices recorded by jobs under a lock: the "jobs that touch shared state" shape.
final class IndexRecorder: Sendable {
  private let indices = Mutex<[Int]>([])

  init(capacity: Int) {
    indices.withLock { $0.reserveCapacity(capacity) }
  }

  func record(_ index: Int) { indices.withLock { $0.append(index) } }
}

/// Runs `body(producer)` on `count` threads of their own (not tasks).
///
/// Returns once every thread has returned.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
  await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
    let group = DispatchGroup()
    for producer in 0..<count {
      group.enter()
      // Each producer gets a thread of its own, as a networking or file library would.
      let thread = Thread {
        body(producer)
        group.leave()
      }
      thread.start()
    }
    group.notify(queue: .global()) { done.resume() }
  }
}

/// The shapes users write around `enqueueDetached`, one row each.
///
/// Producers as tasks or as threads, no-op jobs or jobs that record their index under a lock;
/// each row's name says which shape it is.
public let producerShapeScenarios: [Scenario] =
  [1, 4, 8, 32].map { threads in
    let producers = threads == 1 ? "1 producer thread" : "\(threads) producer threads"
    return Scenario(
      name: "\(producers) × enqueueDetached, no-op jobs",
      baselineName: "\(producers) × DispatchQueue.async",
      unit: .nanosecondsPerJob,
      target: .info,
      jobs: (400_000, 40_000),
      orderly: { jobs in
        await nanosecondsPerJob(jobs) {
          let queue = SerialQueue()
          await onThreads(threads) { _ in
            for _ in 0..<(jobs / threads) { queue.enqueueDetached {} }
          }
          try? await queue.waitUntilIdle()
        }
      },
      baseline: { jobs in
        await nanosecondsPerJob(jobs) {
          let queue = DispatchQueue(label: "baseline.serial")
          await onThreads(threads) { _ in
            for _ in 0..<(jobs / threads) { queue.async {} }
          }
          await drain(queue)
        }
      }
    )
  } + [
    Scenario(
      name: "1 producer task × enqueueDetached, jobs record their index",
      baselineName: "1 producer task × DispatchQueue.async, same jobs",
      unit: .nanosecondsPerJob,
      target: .info,
      jobs: (1_000_000, 100_000),
      orderly: { jobs in
        let recorder = IndexRecorder(capacity: jobs)
        return await nanosecondsPerJob(jobs) {
          let queue = SerialQueue()
          for index in 0..<jobs { queue.enqueueDetached { recorder.record(index) } }
          try? await queue.waitUntilIdle()
        }
      },
      baseline: { jobs in
        let recorder = IndexRecorder(capacity: jobs)
        return await nanosecondsPerJob(jobs) {
          let queue = DispatchQueue(label: "baseline.serial")
          for index in 0..<jobs { queue.async { recorder.record(index) } }
          await drain(queue)
        }
      }
    )
  ]
