import BuiltProducts
import Foundation
import OrderlyOutbox
import Testing

/// `waitUntilDelivered()` racing `close()` and `stop()`: a waiter hears what happened to the
/// outbox (`.closed`), or keeps waiting through a stop, and never waits forever.
///
/// Each round lets the waiter and the close or stop run side by side, with a random number of
/// yields between them, so that over the rounds the close lands before the waiter looks, while
/// it reads, and after it registered. A waiter left behind fails its round (`outcome(of:within:)`).
///
/// The suite's limit only catches a hang (each waiter is judged by `outcome(of:within:)`):
/// under ThreadSanitizer beside a CPU burner and a build, its rounds took over 2 minutes.
@Suite("Outbox: a waiter racing close() and stop()", .timeLimit(.minutes(8)))
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
      let waiting = waiter(on: outbox)
      for _ in 0..<Int.random(in: 0...6) { await Task.yield() }
      try await outbox.close()
      // `nil` inside: delivered; outside: still waiting a minute after the close.
      let ended = await outcome(of: waiting)
      let expected: OutboxError?? = .some(.closed(path: path ?? ":memory:"))
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
      let waiting = waiter(on: outbox)
      for _ in 0..<Int.random(in: 0...6) { await Task.yield() }
      await outbox.stop()
      outbox.resume()
      try outbox.start(deliver: server.deliver)
      let ended = await outcome(of: waiting)
      let delivered: OutboxError?? = .some(nil)
      #expect(ended == delivered, "round \(round)")
      #expect(server.applied == [Change("b", "1")])
      try await outbox.close()
    }
  }

  /// A task waiting until `outbox` has delivered everything: the error it ended with, or `nil`
  /// once delivered.
  private func waiter(on outbox: Outbox<Change>) -> Task<OutboxError?, Never> {
    Task {
      do throws(OutboxError) {
        try await outbox.waitUntilDelivered()
        return nil
      } catch {
        return error
      }
    }
  }
}
