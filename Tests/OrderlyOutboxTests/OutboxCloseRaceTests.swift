import BuiltProducts
import Foundation
import OrderlyOutbox
import Testing

/// `waitUntilDelivered()` racing `close()` and `stop()`: a waiter hears what happened to the
/// outbox (`.closed`), or keeps waiting through a stop, and never waits forever.
///
/// Each round lets the waiter and the close or stop run side by side, with a random number of
/// yields between them, so that over the rounds the close lands before the waiter looks, while
/// it reads, and after it registered. The suite's time limit catches a waiter left behind.
@Suite("Outbox: a waiter racing close() and stop()", .timeLimit(.minutes(2)))
struct OutboxCloseRaceTests {
  /// An outbox with a stopped line with nothing behind it (so a waiter reads the database
  /// before it registers) and, paused, one message pending on another line.
  private func outboxWithAReadBeforeWaiting(path: String?) async throws -> Outbox<Change> {
    let outbox = try path.map { try Outbox<Change>(path: $0) } ?? Outbox<Change>()
    let server = FakeServer()
    server.refuse("bad")
    try outbox.start(deliver: server.deliver)
    try await outbox.append(Change("a", "bad"), partition: "a")
    // The refused message is a dead letter once nothing is pending.
    try? await outbox.waitUntilDelivered()
    outbox.pause()
    try await outbox.append(Change("b", "1"), partition: "b")
    return outbox
  }

  @Test(
    "a waiter racing close() ends with .closed, in memory and in a file",
    arguments: [false, true]
  )
  func closeRacesWait(inFile: Bool) async throws {
    let folder = try ScratchFolder()
    let rounds = inFile ? 40 : 300
    for round in 0..<rounds {
      let path = inFile ? folder.path("outbox-\(round).sqlite") : nil
      let outbox = try await outboxWithAReadBeforeWaiting(path: path)
      let waiter = Task { () async -> OutboxError? in
        do throws(OutboxError) {
          try await outbox.waitUntilDelivered()
          return nil
        } catch {
          return error
        }
      }
      for _ in 0..<Int.random(in: 0...6) { await Task.yield() }
      try await outbox.close()
      let ended = await ending(of: waiter)
      let expected = Ended.error(.closed(path: path ?? ":memory:"))
      #expect(ended == expected, "round \(round)")
    }
  }

  @Test("a waiter racing stop() keeps waiting, and ends once a new start delivers")
  func stopRacesWait() async throws {
    let folder = try ScratchFolder()
    for round in 0..<40 {
      let path = folder.path("outbox-\(round).sqlite")
      let outbox = try Outbox<Change>(path: path)
      let server = FakeServer()
      try outbox.start(deliver: server.deliver)
      outbox.pause()
      try await outbox.append(Change("b", "1"), partition: "b")
      let waiter = Task { () async -> OutboxError? in
        do throws(OutboxError) {
          try await outbox.waitUntilDelivered()
          return nil
        } catch {
          return error
        }
      }
      for _ in 0..<Int.random(in: 0...6) { await Task.yield() }
      await outbox.stop()
      outbox.resume()
      try outbox.start(deliver: server.deliver)
      let ended = await ending(of: waiter)
      #expect(ended == .delivered, "round \(round)")
      #expect(server.applied == [Change("b", "1")])
      try await outbox.close()
    }
  }

  /// How a waiter ended, or that it had not.
  enum Ended: Equatable {
    case delivered
    case error(OutboxError)
    /// Still waiting a minute after the close or the new start: it would have waited for ever.
    case stillWaiting
  }

  /// How `waiter` ends, waiting at most a minute (real time).
  ///
  /// A waiter left behind fails its round instead of holding the whole test run. Time decides
  /// nothing else here.
  private func ending(of waiter: Task<OutboxError?, Never>) async -> Ended {
    let (stream, continuation) = AsyncStream.makeStream(of: Ended.self)
    let watcher = Task {
      let error = await waiter.value
      continuation.yield(error.map(Ended.error) ?? .delivered)
    }
    let timer = Task {
      try? await Task.sleep(for: .seconds(60))
      continuation.yield(.stillWaiting)
    }
    var first = Ended.stillWaiting
    for await ended in stream {
      first = ended
      break
    }
    continuation.finish()
    timer.cancel()
    _ = watcher
    return first
  }
}
