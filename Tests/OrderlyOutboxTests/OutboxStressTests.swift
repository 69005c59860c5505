import Foundation
import OrderlyCore
import OrderlyOutbox
import OrderlyTestSupport
import Testing

@Suite("Outbox under stress: many producers, cancelled appends, pauses")
struct OutboxStressTests {
  @Test(
    "8 producers × 60 appends with random cancellation, 6 lines, pauses: every stored message once, in order per line",
    arguments: [1, 2, 3] as [UInt64]
  )
  func producers(seed: UInt64) async throws {
    let outbox = try Outbox<Change>(partition: { $0.note })
    let server = FakeServer()
    try outbox.start(limit: 3, deliver: server.deliver)
    let stored = OrderedRecorder<Change>()
    var generator = SeededGenerator(seed: seed)
    let cancelAfter = (0..<8).map { _ in Int.random(in: 0..<60, using: &generator) }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        let task = Task {
          for index in 0..<60 {
            let change = Change("line\((producer + index) % 6)", "p\(producer)-\(index)")
            do {
              try await outbox.append(change)
              stored.record(change)
            } catch {
              return
            }
            await Task.yield()
          }
        }
        group.addTask {
          for _ in 0..<cancelAfter[producer] { await Task.yield() }
          if producer.isMultiple(of: 2) { task.cancel() }
          await task.value
        }
      }
      group.addTask {
        for _ in 0..<5 {
          outbox.pause()
          await Task.yield()
          outbox.resume()
          await Task.yield()
        }
      }
      try await group.waitForAll()
    }
    try await outbox.waitUntilDelivered()
    let applied = server.applied
    let expected = stored.values
    #expect(applied.count == expected.count)
    #expect(Set(applied.map(\.text)) == Set(expected.map(\.text)))
    #expect(server.duplicates == 0)
    // Within a line, each producer's messages arrive in the order it appended them.
    for line in 0..<6 {
      let texts = applied.filter { $0.note == "line\(line)" }.map(\.text)
      for producer in 0..<8 {
        let indexes = texts.filter { $0.hasPrefix("p\(producer)-") }.compactMap {
          Int($0.split(separator: "-")[1])
        }
        #expect(indexes == indexes.sorted())
      }
    }
    #expect(outbox.pendingCount == 0)
  }

  @Test("stop while deliveries run: nothing lost, nothing applied twice by an idempotent server")
  func stopAndRestart() async throws {
    let outbox = try Outbox<Change>(partition: { $0.note })
    try await outbox.append(contentsOf: (0..<300).map { Change("line\($0 % 5)", "\($0)") })
    let server = FakeServer()
    for _ in 0..<5 {
      try outbox.start(limit: 3, deliver: server.deliver)
      for _ in 0..<20 { await Task.yield() }
      await outbox.stop()
    }
    try outbox.start(limit: 3, deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.applied.count == 300)
    for line in 0..<5 {
      let indexes = server.applied.filter { $0.note == "line\(line)" }.compactMap { Int($0.text) }
      #expect(indexes == indexes.sorted() && indexes.count == 60)
    }
  }
}
