// Built with the Postgres trait only, on Linux (the relay uses Glibc's sockets); see
// Package.swift.
#if Postgres && canImport(Glibc)
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Testing

/// A worker's server going away and coming back, seen through a ``ServerSwitch`` (the real
/// server stays up for every other test).
@Suite("PostgresOutbox when its server goes away", .timeLimit(.minutes(3)))
struct ServerAwayTests {
  @Test(
    "the server goes away mid-delivery and comes back: the delivery is cancelled and given again first, a waiting append completes, nothing is lost or reordered"
  )
  func awayAndBack() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let relay = try ServerSwitch(serverURL: database.url)
    defer { relay.down() }
    let worker = try await database.outbox(
      of: String.self,
      client: try database.client(url: relay.url)
    )
    // Another process, whose way to the server never breaks.
    let writer = try await database.outbox(of: String.self)
    let seen = Recorder<String>()
    let cancelled = Recorder<String>()
    let inDelivery = AsyncGate()
    try worker.start(lease: .seconds(2), pollInterval: .milliseconds(100)) { envelope in
      seen.record("\(envelope.message):\(envelope.fence ?? 0)")
      if envelope.message == "before-4" && envelope.attempt == 1 {
        await inDelivery.open()
        do {
          try await Task.sleep(for: .seconds(600))
        } catch {
          cancelled.record(envelope.message)
          throw error
        }
      }
    }
    try await worker.append(contentsOf: (0..<5).map { "before-\($0)" }, partition: "k")
    await inDelivery.wait()

    relay.down()
    // Appended by another process while this worker's server is away.
    try await writer.append(contentsOf: (0..<5).map { "during-\($0)" }, partition: "k")
    // An append of the worker's own waits for the server; it is not lost.
    let late = Task { try await worker.append("late", partition: "k") }
    // The worker cannot renew its lease: it cancels the delivery before the lease can lapse.
    #expect(await cancelled.wait { $0 == ["before-4"] })
    // Then the lease lapses in the database.
    #expect(
      await eventually {
        try await database.fleetCount(
          """
          SELECT count(*)::bigint FROM orderly_outbox_lease
          WHERE line = 'k' AND owner IS NOT NULL AND expires_at > now()
          """
        ) == 0
      }
    )

    try relay.up()
    // The waiting append completes once the server is back, after the other process's.
    _ = try await late.value
    #expect(await eventually { try await writer.pendingCount() == 0 })
    #expect(await seen.wait { $0.last?.hasPrefix("late:") == true })
    await worker.stop()
    // The cut delivery comes again first, with a higher fence; at least once, so a delivery
    // cut by the outage may come twice in a row: none is missing or out of order.
    var distinct: [String] = []
    for entry in seen.all {
      let message = String(entry.prefix { $0 != ":" })
      if distinct.last != message { distinct.append(message) }
    }
    #expect(
      distinct == (0..<5).map { "before-\($0)" } + (0..<5).map { "during-\($0)" } + ["late"]
    )
    let fences = seen.all.filter { $0.hasPrefix("before-4:") }.map { $0.drop { $0 != ":" } }
    #expect(fences.count >= 2 && fences.first != fences.last, "\(seen.all)")
  }

  @Test(
    "a server that stays away: an append fails with cannotOpen, saying what to check (or at once with cancelled, if its task is cancelled), and stores nothing"
  )
  func staysAway() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let relay = try ServerSwitch(serverURL: database.url)
    let outbox = try await database.outbox(
      of: String.self,
      client: try database.client(url: relay.url)
    )
    try await outbox.append("kept")
    relay.down()
    // An append whose task is cancelled does not wait for the server: cancelled. (The task
    // cancels itself before it appends: a cancellation from outside can land just as
    // PostgresNIO's pool queues the request, which the pool then misses.)
    let cancelled = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await outbox.append("cancelled")
    }
    await #expect {
      try await cancelled.value
    } throws: { error in
      guard case .cancelled = error as? OutboxError else { return false }
      return true
    }
    // Sent on a cut connection, an append fails at once; otherwise it waits while the client's
    // pool tries to connect, about a minute. Either way: cannotOpen, saying what to check.
    for _ in 0..<2 {
      await #expect {
        try await outbox.append("refused")
      } throws: { error in
        guard case .cannotOpen(let path, let reason) = error as? OutboxError else { return false }
        return reason.contains("check that") && reason.contains("accepts connections")
          && path.hasPrefix("postgresql://") && !"\(error)".contains("folder")
      }
    }
    #expect(
      try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_message") == 1
    )
  }

  @Test(
    "a server that cannot be reached: cancelling a waiting append ends it with cancelled, and nothing is stored"
  )
  func cancelWaitingAppend() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let relay = try ServerSwitch(serverURL: database.url)
    let outbox = try await database.outbox(
      of: String.self,
      client: try database.client(url: relay.url)
    )
    try await outbox.append("kept")
    relay.down()
    // An append sent on a connection the relay cut fails at once (cannotOpen); once the pool has
    // no connection left, the next one waits for a new connection: that is the one cancelled.
    var cancelledWhileWaiting = false
    for _ in 0..<10 where !cancelledWhileWaiting {
      let waiting = Task { try await outbox.append("cancelled while waiting") }
      // Long enough to be waiting for a connection, far shorter than the pool's minute of tries.
      try await Task.sleep(for: .milliseconds(300))
      waiting.cancel()
      do {
        _ = try await waiting.value
        Issue.record("an append succeeded while the server could not be reached")
        return
      } catch OutboxError.cancelled {
        cancelledWhileWaiting = true
      } catch OutboxError.cannotOpen {
        continue  // sent on a cut connection before it could wait
      }
    }
    #expect(cancelledWhileWaiting)
    #expect(
      try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_message") == 1
    )
  }
}
#endif
