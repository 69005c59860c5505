// Built with the Postgres trait only; see Package.swift.
#if Postgres
import BuiltProducts
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
      // `nil` inside: delivered; outside: still waiting a minute after the close.
      let ended = await outcome(of: waiter)
      let expected: OutboxError?? = .some(.closed(path: outbox.database))
      #expect(ended == expected, "round \(round)")
    }
  }
}
#endif
