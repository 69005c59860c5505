// How a PostgreSQL worker hears of new messages: LISTEN sessions, and the doorbell that wakes its
// loop early.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
import OrderlyOutboxCore
import PostgresNIO

extension FleetWorker {
  // MARK: Notifications

  /// How long one `LISTEN` session lasts before the worker listens again on a fresh
  /// connection.
  ///
  /// A session on a connection that died without a word (a cut network) hears nothing, and
  /// must not last for ever. Polling covers what a session misses.
  static var listenSession: Duration { .seconds(60) }

  func listenLoop() async {
    let client = client
    let bell = bell
    while !Task.isCancelled {
      do {
        try await withDeadline(Self.listenSession) {
          try await client.withConnection { connection in
            try await connection.listen(on: PostgresSchema.channel) { notifications in
              // Something may have been appended while the listener was not there.
              bell.ring()
              for try await _ in notifications { bell.ring() }
            }
          }
        }
      } catch is QueryTimedOut {
        // The session's time is up: listen again at once.
        continue
      } catch {
        if Task.isCancelled { return }
        logger.debug(
          "listening stopped; polling until it is back",
          metadata: [
            "worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))",
          ]
        )
      }
      // Safe as library code: a pause before listening again after a failed session, one poll
      // interval of real time (polling covers what it misses); cancelled by end().
      try? await Task.sleep(for: settings.pollInterval)
    }
  }
}

/// Wakes a waiting loop early: rung by notifications and freed slots.
final class Doorbell: Sendable {
  private struct Bell {
    var rung = false
    var waiter: CheckedContinuation<Void, Never>?
  }
  private let bell = OrderlyLock(Bell())

  func ring() {
    let waiter = bell.withLock(announcingTo: self) { bell in
      guard let waiter = bell.waiter else {
        bell.rung = true
        return CheckedContinuation<Void, Never>?.none
      }
      bell.waiter = nil
      return waiter
    }
    waiter?.resume()
  }

  /// Returns when the bell rings (or rang since the last wait), after `timeout`, or when the
  /// task is cancelled.
  ///
  /// One waiter at a time.
  func wait(upTo timeout: Duration) async {
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await self.waitForRing() }
      // Safe as library code: the bound of the wait for a ring (a poll interval, real time as
      // the leases); cancelled as soon as the bell rings or the loop is cancelled.
      group.addTask { try? await Task.sleep(for: timeout) }
      await group.next()
      group.cancelAll()
    }
  }

  private func waitForRing() async {
    await withTaskCancellationHandler {
      // resumed by: ring(), or the cancellation handler below (wait(upTo:) cancels it when its
      // timeout ends first).
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let now = bell.withLock(announcingTo: self) { bell -> Bool in
          if bell.rung || Task.isCancelled {
            bell.rung = false
            return true
          }
          bell.waiter = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let waiter = bell.withLock(announcingTo: self) { bell in
        defer { bell.waiter = nil }
        return bell.waiter
      }
      waiter?.resume()
    }
  }
}
#endif

#if Postgres
#endif
