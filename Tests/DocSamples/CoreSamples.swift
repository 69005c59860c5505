// The code the OrderlyCore, OrderlyTestSupport and OrderlyRepository documentation shows,
// compiled by `swift build`; docs-gen copies each sample into its `orderly:sample` region.
// sample: core-overview, core-blocking-work, testing-order-gates
import OrderlyCore
// end sample
// sample: repository-overview
import OrderlyRepository
// end sample
// sample: testing-order-gates, testing-order-clock
import OrderlyTestSupport
// end sample
// sample: testing-order-gates
import Testing
// end sample

/// What the samples save and fetch.
struct Draft: Sendable {}

/// A slow service, as the samples call it.
struct DraftsService: Sendable {
  func save(_ note: Draft) async throws {}
  func delete(_ note: Draft) async throws {}
  func fetchAll() async throws -> [Draft] { [] }
}

func coreOverview(service: DraftsService, note: Draft, oldNote: Draft) async throws {
  // sample: core-overview
  let queue = SerialQueue(name: "notes")

  // From synchronous code, like Task {}, but in order:
  queue.enqueue { try await service.save(note) }
  queue.enqueue { try await service.delete(oldNote) }

  // Or wait for a result, running in your own task:
  let notes = try await queue.enqueueAndWait { try await service.fetchAll() }
  // end sample
  _ = notes
}

/// A write that blocks its thread, as the samples make one.
func blockingWrite(_ record: String) throws {}

func runningBlockingWork(record: String) {
  // sample: core-blocking-work
  let disk = DedicatedThreadExecutor(name: "disk", threads: 1)
  let writes = SerialQueue(name: "writes", executor: disk)
  writes.enqueueDetached { try blockingWrite(record) }  // on the "disk" thread, in order
  // end sample
}

func repositoryOverview() {
  // sample: repository-overview
  let repository = NotesRepository(service: InMemoryNotesService())
  // From any code, on any actor or none: each call is in line when submit returns.
  repository.submit(.create(title: "milk"))
  repository.submit(.create(title: "eggs"))
  let titles = repository.submit(.notes)
  Task { print(try await titles.value.map(\.title)) }  // ["milk", "eggs"]
  // end sample
}

func testingOrderGates() async throws {
  // sample: testing-order-gates
  let queue = SerialQueue()
  let started = Gate(), release = Gate()
  let log = OrderedRecorder<Int>()

  queue.enqueueDetached {
    log.record(1)
    started.open()  // tell the test the job is running
    try await release.wait()  // and hold it there
    log.record(2)
  }
  queue.enqueue { log.record(3) }

  try await started.wait()
  #expect(log.values == [1])  // job 3 has not started: job 1 is still running
  release.open()
  try await log.waitForCount(3)
  #expect(log.values == [1, 2, 3])
  // end sample
}

func testingOrderClock() async throws {
  // sample: testing-order-clock
  let clock = ManualClock()
  let timer = Task { try await clock.sleep(for: .seconds(30)) }
  try await clock.waitForSleepers(1)  // the timer is asleep now
  clock.advance(by: .seconds(30))  // and wakes at once
  try await timer.value
  // end sample
}
