import Foundation
import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

@Suite("SerialQueue and ConcurrentQueue(limit: 1): stress", .timeLimit(.minutes(5)))
struct SerialQueueStressTests {
  @Test(
    "16 producers × 10,000 jobs: every producer's order kept, nothing lost, no overlap",
    arguments: QueueKind.allCases
  )
  func manyProducers(kind: QueueKind) async throws {
    struct Entry {
      let producer: Int
      let sequence: Int
    }
    let producers = 16
    let jobsPerProducer = 10_000
    let queue = kind.make(name: "stress")
    let log = OrderedRecorder<Entry>()
    let overlap = OrderedRecorder<Int>()
    let active = ActiveCounter()
    await withTaskGroup(of: Void.self) { group in
      for producer in 0..<producers {
        group.addTask {
          for sequence in 0..<jobsPerProducer {
            let job: @Sendable () async -> Void = {
              if active.enter() != 1 { overlap.record(producer) }
              log.record(Entry(producer: producer, sequence: sequence))
              active.leave()
            }
            if sequence.isMultiple(of: 8) {
              queue.enqueue(operation: job)
            } else {
              queue.enqueueDetached(operation: job)
            }
          }
        }
      }
    }
    try await queue.waitUntilIdle()
    let values = log.values
    #expect(values.count == producers * jobsPerProducer)
    #expect(overlap.count == 0)
    var next = Array(repeating: 0, count: producers)
    var inOrder = true
    for entry in values {
      if entry.sequence != next[entry.producer] { inOrder = false }
      next[entry.producer] = entry.sequence + 1
    }
    #expect(inOrder)
    #expect(next.allSatisfy { $0 == jobsPerProducer })
  }

  @Test(
    "producers racing idle waiters and counters: a job enqueued before waitUntilIdle has run",
    arguments: QueueKind.allCases
  )
  func idleWaitersRacingProducers(kind: QueueKind) async throws {
    struct Entry {
      let producer: Int
      let sequence: Int
    }
    let producers = 6
    let jobsPerProducer = 400
    let queue = kind.make(name: "idle-race")
    let log = OrderedRecorder<Entry>()
    // Jobs that yield now and then let the line empty and fill again, so jobs keep moving
    // between the inbox and the line while producers wait for idle and read the counters.
    try await withThrowingTaskGroup(of: Void.self) { group in
      for producer in 0..<producers {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(producer) &+ 31)
          for sequence in 0..<jobsPerProducer {
            queue.enqueueDetached {
              log.record(Entry(producer: producer, sequence: sequence))
              if sequence.isMultiple(of: 7) { await Task.yield() }
            }
            if Int.random(in: 0..<40, using: &generator) == 0 {
              try await queue.waitUntilIdle()
              let ran = log.values.filter { $0.producer == producer }.count
              #expect(
                ran == sequence + 1,
                "producer \(producer) waited for idle after job \(sequence)"
              )
            }
            if sequence.isMultiple(of: 50) { _ = queue.pendingCount }
          }
        }
      }
      try await group.waitForAll()
    }
    try await queue.waitUntilIdle()
    let values = log.values
    #expect(values.count == producers * jobsPerProducer)
    for producer in 0..<producers {
      let sequences = values.filter { $0.producer == producer }.map(\.sequence)
      #expect(sequences == Array(0..<jobsPerProducer))
    }
    #expect(queue.pendingCount == 0 && queue.isIdle)
  }

  @Test(
    "1,000 rounds of random cancellation: no hang, every awaiter resumed, order kept",
    arguments: QueueKind.allCases
  )
  func randomCancellation(kind: QueueKind) async throws {
    var generator = SeededGenerator(seed: 0x0DE7_1EE7)
    for round in 0..<1_000 {
      let queue = kind.make(name: "round \(round)")
      let log = OrderedRecorder<Int>()
      let count = Int.random(in: 2...12, using: &generator)
      var handles: [QueuedTask<Int>] = []
      var waiters: [Task<Int, any Error>] = []
      for index in 0..<count {
        let job: @Sendable () async throws -> Int = {
          log.record(index)
          await Task.yield()
          return index
        }
        switch Int.random(in: 0..<3, using: &generator) {
        case 0: handles.append(queue.enqueue(operation: job))
        case 1: handles.append(queue.enqueueDetached(operation: job))
        default: waiters.append(Task { try await queue.enqueueAndWait(operation: job) })
        }
      }
      for handle in handles where Bool.random(using: &generator) { handle.cancel() }
      for waiter in waiters where Bool.random(using: &generator) { waiter.cancel() }
      if Int.random(in: 0..<10, using: &generator) == 0 { queue.cancelAll() }
      for handle in handles {
        switch await handle.result {
        case .success(let value): #expect((0..<count).contains(value))
        case .failure(let error): #expect(error is CancellationError)
        }
      }
      for waiter in waiters {
        switch await waiter.result {
        case .success(let value): #expect((0..<count).contains(value))
        case .failure(let error): #expect(error is CancellationError)
        }
      }
      try await queue.waitUntilIdle()
      #expect(queue.isIdle && queue.pendingCount == 0)
      // Jobs enqueued from this task (handles) ran in enqueue order.
      let ran = log.values
      let handleIndices = Set(await handles.asyncCompactMap { try? await $0.value })
      let ranHandles = ran.filter { handleIndices.contains($0) }
      #expect(ranHandles == ranHandles.sorted())
    }
  }
}

/// Counts jobs running at once.
final class ActiveCounter: Sendable {
  private let balance = Mutex(0)

  func enter() -> Int {
    balance.withLock(announcingTo: self) { value in
      value += 1
      return value
    }
  }

  func leave() {
    balance.withLock(announcingTo: self) { $0 -= 1 }
  }
}

extension Array {
  func asyncCompactMap<T>(_ transform: (Element) async throws -> T?) async rethrows -> [T] {
    var result: [T] = []
    for element in self {
      if let value = try await transform(element) { result.append(value) }
    }
    return result
  }
}

@Suite("Producer threads (not tasks) contending for a queue's locks")
struct ProducerThreadStressTests {
  @Test("16 producer threads × 400 enqueueDetached: every job runs once, each thread's in order")
  func producerThreads() async throws {
    let queue = SerialQueue(name: "threads")
    let recorder = OrderedRecorder<Int>()
    let threads = 16
    let perThread = 400
    let finished = ThreadCount()
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      for thread in 0..<threads {
        Thread {
          for index in 0..<perThread {
            queue.enqueueDetached { recorder.record(thread * perThread + index) }
          }
          // Exactly one thread, the last to finish, sees the count reach `threads`.
          if finished.increment() == threads { continuation.resume() }
        }.start()
      }
    }
    try await queue.waitUntilIdle()
    let values = recorder.values
    #expect(values.count == threads * perThread)
    #expect(Set(values).count == threads * perThread)
    for thread in 0..<threads {
      let mine = values.filter { $0 / perThread == thread }
      #expect(mine == mine.sorted(), "thread \(thread)'s jobs ran out of order")
    }
  }
}

/// How many producer threads finished.
private final class ThreadCount: Sendable {
  private let value = Atomic<Int>(0)

  /// Adds one and returns the new count.
  func increment() -> Int { value.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue }
}
