// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyPostgres
import Testing

/// `waitUntilDelivered()` racing `close()` on PostgreSQL: the waiter ends with `.closed`, and is
/// never left waiting.
@Suite("PostgresOutbox: a waiter racing close()", .timeLimit(.minutes(3)))
struct PostgresCloseRaceTests {
  @Test("a waiter racing close() ends with .closed, whenever the close lands")
  func closeRacesWait() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    for round in 0..<30 {
      let outbox = try await database.outbox(of: String.self, client: client)
      if round == 0 { try await outbox.append("waits", partition: "k") }
      let waiter = Task { () async -> OutboxError? in
        do throws(OutboxError) {
          try await outbox.waitUntilDelivered()
          return nil
        } catch {
          return error
        }
      }
      for _ in 0..<Int.random(in: 0...20) { await Task.yield() }
      await outbox.close()
      let ended = await Self.ending(of: waiter)
      #expect(ended == .error(.closed(path: outbox.database)), "round \(round)")
    }
  }

  enum Ended: Equatable {
    case delivered
    case error(OutboxError)
    case stillWaiting
  }

  /// How `waiter` ends, waiting at most a minute (real time).
  ///
  /// A waiter left behind fails its round instead of holding the whole test run.
  private static func ending(of waiter: Task<OutboxError?, Never>) async -> Ended {
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
#endif
