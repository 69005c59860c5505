import Dispatch
import OrderlyTestSupport
import Synchronization
import Testing

@testable import OrderlyCore

/// `execute(_:)`: work with no handle keeps its place in the queue's one order with every other
/// kind of job, is dropped unrun by `cancelAll()`, sees `isCurrent`, and reports events only
/// while someone listens.
@Suite("execute(_:): the lane for work with no handle", .timeLimit(.minutes(3)))
struct ExecuteLaneTests {
  /// The kinds of job a test mixes, chosen by index.
  enum Kind: CaseIterable {
    case lane, laneAgain, detachedSync, detachedAsync, enqueue
  }

  @Test(
    "mixed with every other kind of job from one producer: the order enqueued, never overlapping",
    arguments: QueueKind.allCases
  )
  func orderWithEveryKind(kind: QueueKind) async throws {
    let queue = kind.make(name: "mixed")
    let log = OrderedRecorder<Int>()
    let active = ActiveCounter()
    let overlaps = OrderedRecorder<Int>()
    for index in 0..<500 {
      // Runs of lane work (two lane kinds in a row, often) between the other kinds.
      switch Kind.allCases[(index * 7 + index / 5) % Kind.allCases.count] {
      case .lane, .laneAgain:
        queue.execute {
          if active.enter() != 1 { overlaps.record(index) }
          log.record(index)
          active.leave()
        }
      case .detachedSync:
        queue.enqueueDetachedSynchronously {
          if active.enter() != 1 { overlaps.record(index) }
          log.record(index)
          active.leave()
        }
      case .detachedAsync:
        queue.enqueueDetached {
          if active.enter() != 1 { overlaps.record(index) }
          await Task.yield()
          log.record(index)
          active.leave()
        }
      case .enqueue:
        queue.enqueue {
          if active.enter() != 1 { overlaps.record(index) }
          await Task.yield()
          log.record(index)
          active.leave()
        }
      }
    }
    let waited = try await queue.enqueueAndWait { log.values.count }
    try await queue.waitUntilIdle()
    #expect(waited == 500)
    #expect(log.values == Array(0..<500))
    #expect(overlaps.values.isEmpty)
  }

  @Test("behind a busy job, lane work waits its turn, counts in pendingCount, and runs in order")
  func waitsBehindBusyJob() async throws {
    let release = Gate()
    let queue = try await busyQueue(.serial, release: release)
    let log = OrderedRecorder<String>()
    for index in 1...5 { queue.execute { log.record("lane \(index)") } }
    queue.enqueueDetachedSynchronously { log.record("detached") }
    for index in 6...8 { queue.execute { log.record("lane \(index)") } }
    let pending = queue.pendingCount
    #expect(pending == 9)
    #expect(log.values.isEmpty)
    release.open()
    try await queue.waitUntilIdle()
    let expected = (1...5).map { "lane \($0)" } + ["detached"] + (6...8).map { "lane \($0)" }
    #expect(log.values == expected)
    #expect(queue.pendingCount == 0)
  }

  @Test(
    "cancelAll drops lane work that has not started; work enqueued afterwards runs",
    arguments: QueueKind.allCases
  )
  func cancelAllDropsPendingWork(kind: QueueKind) async throws {
    let release = Gate()
    let queue = try await busyQueue(kind, release: release)
    let ran = OrderedRecorder<String>()
    for index in 1...20 { queue.execute { ran.record("dropped \(index)") } }
    let detached = queue.enqueueDetachedSynchronously { ran.record("dropped detached") }
    queue.cancelAll()
    queue.execute { ran.record("after") }
    release.open()
    try await queue.waitUntilIdle()
    #expect(ran.values == ["after"])
    #expect(await endsCancelled(detached))
  }

  @Test("cancelAll from inside lane work drops the closures after it, not the running one")
  func cancelAllWhileRunning() async throws {
    let release = Gate()
    let queue = try await busyQueue(.serial, release: release)
    let ran = OrderedRecorder<Int>()
    guard case .serial(let serial) = queue else {
      Issue.record("busyQueue(.serial) made another kind of queue")
      return
    }
    serial.execute { ran.record(1) }
    serial.execute {
      ran.record(2)
      serial.cancelAll()
      ran.record(3)
    }
    for index in 4...10 { serial.execute { ran.record(index) } }
    release.open()
    try await serial.waitUntilIdle()
    #expect(ran.values == [1, 2, 3])
    // The queue stays usable.
    serial.execute { ran.record(11) }
    try await serial.waitUntilIdle()
    #expect(ran.values == [1, 2, 3, 11])
  }

  @Test("isCurrent is true inside lane work, for its own queue only")
  func isCurrentInside() async throws {
    let queue = SerialQueue(name: "lane")
    let other = SerialQueue(name: "other")
    let seen = OrderedRecorder<String>()
    queue.execute {
      seen.record("own \(queue.isCurrent)")
      seen.record("other \(other.isCurrent)")
      queue.assertOnQueue()
    }
    try await queue.waitUntilIdle()
    #expect(seen.values == ["own true", "other false"])
    // Outside the closure, on the same thread or not, it is false again.
    #expect(!queue.isCurrent)
  }

  @Test("isCurrent(forKey:) is true inside a keyed queue's lane work, for its key only")
  func keyedIsCurrentInside() async throws {
    let queue = KeyedSerialQueue<String>()
    let seen = OrderedRecorder<String>()
    queue.execute(forKey: "a") {
      seen.record("a \(queue.isCurrent(forKey: "a"))")
      seen.record("b \(queue.isCurrent(forKey: "b"))")
    }
    try await queue.waitUntilIdle()
    #expect(seen.values == ["a true", "b false"])
  }

  @Test("with a listener, lane work reports its events; with none, it makes none")
  func eventsOnlyWhenListening() async throws {
    let queue = SerialQueue(name: "events")
    // No listener: nothing is buffered for a listener that subscribes later.
    queue.execute {}
    try await queue.waitUntilIdle()
    var events = queue.events.makeAsyncIterator()
    queue.execute {}
    var kinds: [String] = []
    for _ in 0..<3 {
      guard let event = await events.next() else { break }
      kinds.append(String(describing: event.kind))
    }
    #expect(kinds == ["enqueued", "started", "finished"])
  }

  @Test("waitUntilIdle waits for lane work enqueued before it")
  func waitUntilIdleCoversLaneWork() async throws {
    let release = Gate()
    let queue = try await busyQueue(.serial, release: release)
    let ran = OrderedRecorder<Int>()
    for index in 0..<1_000 { queue.execute { ran.record(index) } }
    let waiter = Task { try await queue.waitUntilIdle() }
    release.open()
    try await waiter.value
    #expect(ran.count == 1_000)
  }

  @Test("a dropped queue still runs its lane work")
  func droppedQueueRunsWork() async throws {
    let ran = OrderedRecorder<Int>()
    do {
      let queue = SerialQueue()
      for index in 0..<100 { queue.execute { ran.record(index) } }
    }
    try await ran.waitForCount(100)
    #expect(ran.values == Array(0..<100))
  }

  @Test("lane work behind a .low job still runs in order")
  func behindLowPriorityJob() async throws {
    let queue = SerialQueue()
    let gate = Gate()
    let log = OrderedRecorder<String>()
    queue.enqueueDetached(priority: .low) {
      try? await gate.wait()
      log.record("low")
    }
    for index in 1...3 { queue.execute { log.record("lane \(index)") } }
    gate.open()
    try await queue.waitUntilIdle()
    #expect(log.values == ["low", "lane 1", "lane 2", "lane 3"])
  }

  @Test("ConcurrentQueue: lane work keeps barriers' order and the limit")
  func concurrentBarriersAndLimit() async throws {
    let queue = ConcurrentQueue(name: "wide", limit: 3)
    let active = ActiveCounter()
    let running = OrderedRecorder<Int>()
    let log = OrderedRecorder<String>()
    for round in 0..<20 {
      for index in 0..<6 {
        queue.execute {
          running.record(active.enter())
          log.record("start \(round).\(index)")
          log.record("end \(round).\(index)")
          active.leave()
        }
      }
      queue.enqueueBarrier {
        let now = active.enter()
        log.record("barrier \(round) alone: \(now == 1)")
        active.leave()
      }
    }
    try await queue.waitUntilIdle()
    let values = log.values
    let highest = running.values.max() ?? 0
    #expect(highest <= 3)
    for round in 0..<20 {
      let barrier = values.firstIndex(of: "barrier \(round) alone: true")
      #expect(barrier != nil, "barrier \(round) ran with other jobs")
      guard let barrier else { continue }
      for index in 0..<6 {
        let ended = values.firstIndex(of: "end \(round).\(index)") ?? Int.max
        #expect(ended < barrier, "job \(round).\(index) ended after its barrier")
        if round + 1 < 20 {
          let next = values.firstIndex(of: "start \(round + 1).\(index)") ?? -1
          #expect(next > barrier, "job \(round + 1).\(index) started before barrier \(round)")
        }
      }
    }
  }

  @Test("ConcurrentQueue: each closure takes a slot of its own, so closures run side by side")
  func concurrentSideBySide() async throws {
    // Threads of their own: the two closures block each other's thread until both have begun.
    let executor = DedicatedThreadExecutor(name: "lane.side-by-side", threads: 2)
    let queue = ConcurrentQueue(name: "wide", limit: 2, executor: executor)
    let first = DispatchSemaphore(value: 0)
    let second = DispatchSemaphore(value: 0)
    let met = OrderedRecorder<Bool>()
    queue.execute {
      first.signal()
      met.record(second.wait(timeout: .now() + 30) == .success)
    }
    queue.execute {
      second.signal()
      met.record(first.wait(timeout: .now() + 30) == .success)
    }
    try await queue.waitUntilIdle()
    #expect(met.values == [true, true])
  }

  @Test("KeyedSerialQueue: lane work keeps each key's order with every other kind of job")
  func keyedOrder() async throws {
    let queue = KeyedSerialQueue<Int>()
    let log = OrderedRecorder<String>()
    for index in 0..<300 {
      let key = index % 3
      switch index % 4 {
      case 0, 1: queue.execute(forKey: key) { log.record("\(key):\(index)") }
      case 2: queue.enqueueDetached(forKey: key) { log.record("\(key):\(index)") }
      default:
        queue.enqueue(forKey: key) {
          await Task.yield()
          log.record("\(key):\(index)")
        }
      }
    }
    try await queue.waitUntilIdle()
    let values = log.values
    #expect(values.count == 300)
    for key in 0..<3 {
      let ofKey = values.filter { $0.hasPrefix("\(key):") }
      let expected = stride(from: key, to: 300, by: 3).map { "\(key):\($0)" }
      #expect(ofKey == expected)
    }
  }

  @Test("KeyedSerialQueue with a limit on running keys: lane work still runs in each key's order")
  func keyedWithLimit() async throws {
    let queue = KeyedSerialQueue<Int>(limit: 2)
    let log = OrderedRecorder<String>()
    for index in 0..<120 {
      let key = index % 4
      if index % 2 == 0 {
        queue.execute(forKey: key) { log.record("\(key):\(index)") }
      } else {
        queue.enqueueDetached(forKey: key) { log.record("\(key):\(index)") }
      }
    }
    try await queue.waitUntilIdle()
    let values = log.values
    for key in 0..<4 {
      let ofKey = values.filter { $0.hasPrefix("\(key):") }
      let expected = stride(from: key, to: 120, by: 4).map { "\(key):\($0)" }
      #expect(ofKey == expected)
    }
  }

  @Test("KeyedSerialQueue: cancelAll(forKey:) drops that key's pending lane work only")
  func keyedCancel() async throws {
    let queue = KeyedSerialQueue<String>()
    let gate = Gate()
    let started = Gate()
    let ran = OrderedRecorder<String>()
    for key in ["a", "b"] {
      queue.enqueueDetached(forKey: key) {
        if key == "b" { started.open() }
        try? await gate.wait()
      }
    }
    try await started.wait()
    for index in 1...3 {
      queue.execute(forKey: "a") { ran.record("a\(index)") }
      queue.execute(forKey: "b") { ran.record("b\(index)") }
    }
    queue.cancelAll(forKey: "a")
    gate.open()
    try await queue.waitUntilIdle()
    #expect(ran.values == ["b1", "b2", "b3"])
  }
}

/// Many producers and random `cancelAll()` calls: lane work and every other kind keep each
/// producer's order, never overlap, and every closure runs or is dropped by a cancellation.
@Suite("execute(_:) under stress", .timeLimit(.minutes(5)))
struct ExecuteLaneStressTests {
  @Test("8 producers, mixed kinds, random cancelAll: each producer's order holds", arguments: 0..<4)
  func producersWithCancellation(seed: Int) async throws {
    let queue = SerialQueue(name: "stress")
    let log = OrderedRecorder<(producer: Int, sequence: Int)>()
    let active = ActiveCounter()
    let overlaps = OrderedRecorder<Int>()
    let perProducer = 400
    await withTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(seed * 100 + producer))
          for sequence in 0..<perProducer {
            let record: @Sendable () -> Void = {
              if active.enter() != 1 { overlaps.record(sequence) }
              log.record((producer, sequence))
              active.leave()
            }
            switch generator.next() % 8 {
            case 0: queue.enqueueDetached { record() }
            case 1:
              queue.enqueueDetached {
                await Task.yield()
                record()
              }
            case 2: queue.enqueue { record() }
            default: queue.execute { record() }
            }
            if generator.next() % 97 == 0 { await Task.yield() }
          }
        }
      }
      group.addTask {
        var generator = SeededGenerator(seed: UInt64(seed))
        for _ in 0..<5 {
          for _ in 0..<(generator.next() % 50) { await Task.yield() }
          queue.cancelAll()
        }
      }
    }
    // Work enqueued after every cancellation runs, after everything that ran before it.
    queue.execute { log.record((-1, 0)) }
    try await queue.waitUntilIdle()
    let values = log.values
    #expect(overlaps.values.isEmpty)
    let last = values.last
    #expect(last?.producer == -1)
    for producer in 0..<8 {
      let sequences = values.filter { $0.producer == producer }.map(\.sequence)
      let increasing = zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }
      #expect(increasing, "producer \(producer) ran out of order: \(sequences.prefix(40))")
    }
    #expect(queue.pendingCount == 0)
  }

  @Test("8 producers of lane work only: every closure runs, each producer's in order")
  func laneOnlyProducers() async throws {
    let queue = SerialQueue(name: "lane-only")
    let counts = ProducerCounts(producers: 8)
    let disorder = OrderedRecorder<Int>()
    await withTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        group.addTask {
          for sequence in 0..<5_000 {
            queue.execute {
              if counts.next(of: producer) != sequence { disorder.record(producer) }
            }
          }
        }
      }
    }
    try await queue.waitUntilIdle()
    let totals = counts.totals
    #expect(totals == [Int](repeating: 5_000, count: 8))
    #expect(disorder.values.isEmpty)
  }
}

/// How many closures of each producer have run.
final class ProducerCounts: Sendable {
  private let counts: Mutex<[Int]>

  init(producers: Int) {
    counts = Mutex([Int](repeating: 0, count: producers))
  }

  /// Counts one more closure of `producer`, returning how many ran before it.
  func next(of producer: Int) -> Int {
    counts.withLock(announcingTo: self) { counts in
      defer { counts[producer] += 1 }
      return counts[producer]
    }
  }

  var totals: [Int] { counts.withLock(announcingTo: self) { $0 } }
}
