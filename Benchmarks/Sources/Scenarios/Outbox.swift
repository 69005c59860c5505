import Foundation
import GRDB
import OrderlyOutbox
import Synchronization

/// The outbox benchmark's message: what an app would send for a note edit.
struct BenchChange: Codable, Sendable {
  let noteID: Int
  let text: String
}

/// A fresh folder for one measurement, removed afterwards.
func withScratchFile<T>(_ body: (String) async throws -> T) async throws -> T {
  let folder = FileManager.default.temporaryDirectory
    .appendingPathComponent("orderly-bench-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(at: folder) }
  return try await body(folder.appendingPathComponent("bench.sqlite").path)
}

/// A plain GRDB database configured as the outbox's is: WAL, `synchronous = FULL`.
///
/// FULL is set on the writer after the pool opens, as the outbox does: GRDB's WAL set-up runs
/// after `prepareDatabase` and sets NORMAL, so a FULL set there (as this baseline did until
/// the outbox's own fix) is not in effect, and the baseline synced less than the outbox.
func plainDatabase(at path: String) throws -> DatabasePool {
  let pool = try DatabasePool(path: path)
  let mode = try pool.writeWithoutTransaction { db -> Int? in
    try db.execute(sql: "PRAGMA synchronous = FULL")
    return try Int.fetchOne(db, sql: "PRAGMA synchronous")
  }
  guard mode == 2 else { throw DatabaseError(message: "synchronous is \(mode ?? -1), not FULL") }
  try pool.write { db in
    try db.execute(
      sql: """
        CREATE TABLE change (id INTEGER PRIMARY KEY AUTOINCREMENT, uuid TEXT NOT NULL,
        payload BLOB NOT NULL)
        """
    )
  }
  return pool
}

private func change(_ index: Int) -> BenchChange {
  BenchChange(noteID: index % 100, text: "edit \(index)")
}

/// `jobs` appends, one transaction each, or in batches of `batch`; with `unique`, each with a
/// unique key of its own (every append stores its message: the cost of checking and taking the
/// key, not of a duplicate).
func outboxAppends(_ jobs: Int, batch: Int, unique: Bool = false) async throws -> Double {
  try await withScratchFile { path in
    let outbox = try Outbox<BenchChange>(path: path)
    defer { Task { try? await outbox.close() } }
    return try await nanosecondsPerJob(jobs) {
      if batch == 1 {
        for index in 0..<jobs {
          if unique {
            try await outbox.append(change(index), uniqueKey: "edit-\(index)")
          } else {
            try await outbox.append(change(index))
          }
        }
      } else {
        for start in stride(from: 0, to: jobs, by: batch) {
          let changes = (start..<min(start + batch, jobs)).map(change)
          if unique {
            try await outbox.append(contentsOf: changes) { "edit-\($0.text)" }
          } else {
            try await outbox.append(contentsOf: changes)
          }
        }
      }
    }
  }
}

/// The same rows written with plain GRDB: a UUID and the JSON payload, one transaction each or
/// in batches.
func plainInserts(_ jobs: Int, batch: Int) async throws -> Double {
  try await withScratchFile { path in
    let pool = try plainDatabase(at: path)
    return try await nanosecondsPerJob(jobs) {
      for start in stride(from: 0, to: jobs, by: batch) {
        let rows = try (start..<min(start + batch, jobs)).map {
          (UUID().uuidString, try JSONEncoder().encode(change($0)))
        }
        try await pool.write { db in
          for (uuid, payload) in rows {
            try db.execute(
              sql: "INSERT INTO change (uuid, payload) VALUES (?, ?)",
              arguments: [uuid, payload]
            )
          }
        }
      }
    }
  }
}

/// Delivers `jobs` appended messages to a handler that does nothing; with `audit`, the audit
/// trail records every attempt.
func outboxDelivery(_ jobs: Int, audit: Bool = false) async throws -> Double {
  try await withScratchFile { path in
    let outbox = try Outbox<BenchChange>(path: path)
    for start in stride(from: 0, to: jobs, by: 1_000) {
      try await outbox.append(contentsOf: (start..<min(start + 1_000, jobs)).map(change))
    }
    var options = OutboxDeliveryOptions()
    options.audit = audit ? .on : .off
    let result = try await nanosecondsPerJob(jobs) {
      try outbox.start(options, deliver: .each { _ in })
      try await outbox.waitUntilDelivered()
    }
    try await outbox.close()
    return result
  }
}

/// The plain GRDB loop a delivery amounts to: read the first row and decode it (a read, which
/// syncs nothing), hand it to a no-op, then delete it (a write, synced).
func plainDrain(_ jobs: Int) async throws -> Double {
  try await withScratchFile { path in
    let pool = try plainDatabase(at: path)
    try await pool.write { db in
      for index in 0..<jobs {
        try db.execute(
          sql: "INSERT INTO change (uuid, payload) VALUES (?, ?)",
          arguments: [UUID().uuidString, try JSONEncoder().encode(change(index))]
        )
      }
    }
    return try await nanosecondsPerJob(jobs) {
      while true {
        let head = try await pool.read { db -> Int64? in
          guard let row = try Row.fetchOne(db, sql: "SELECT * FROM change ORDER BY id LIMIT 1")
          else { return nil }
          let payload: Data = row["payload"]
          _ = try JSONDecoder().decode(BenchChange.self, from: payload)
          return row["id"]
        }
        guard let head else { return }
        try await pool.write { db in
          try db.execute(sql: "DELETE FROM change WHERE id = ?", arguments: [head])
        }
      }
    }
  }
}

/// Delivers `jobs` messages spread over 1,000 keys to a no-op handler, beside `blocked` keys
/// that do not move.
///
/// Half of those wait at a dead letter (stop the line), half are paused, each with a message
/// behind. The time runs from `start` until every healthy message is delivered; the
/// blocked keys are made (their dead letters written) before it.
func keyedDelivery(_ jobs: Int, blocked: Int) async throws -> Double {
  try await withScratchFile { path in
    let outbox = try Outbox<BenchChange>(path: path, partition: { "key-\($0.noteID)" })
    for key in 0..<blocked {
      let change = { (text: String) in BenchChange(noteID: -1 - key, text: text) }
      try await outbox.append(contentsOf: [change("poison"), change("behind")])
      if key % 2 == 1 { try await outbox.pause(partition: "key-\(-1 - key)") }
    }
    if blocked > 0 {
      // The dead letters first, so that the measured run meets blocked keys from its start.
      try outbox.start { envelope in
        if envelope.message.text == "poison" { throw PermanentDeliveryFailure("refused") }
      }
      while try await outbox.counts().deadLetters < (blocked + 1) / 2 {
        try await Task.sleep(for: .milliseconds(1))
      }
      await outbox.stop()
    }
    for start in stride(from: 0, to: jobs, by: 1_000) {
      try await outbox.append(
        contentsOf: (start..<min(start + 1_000, jobs)).map {
          BenchChange(noteID: $0 % 1_000, text: "edit \($0)")
        }
      )
    }
    let delivered = DeliveryCount(until: jobs)
    let result = try await nanosecondsPerJob(jobs) {
      try outbox.start { envelope in
        if envelope.message.noteID >= 0 { delivered.add() }
      }
      await delivered.wait()
    }
    try await outbox.close()
    return result
  }
}

/// Counts deliveries, and lets a task wait until there were `until` of them.
final class DeliveryCount: Sendable {
  private let state: Mutex<(count: Int, waiter: CheckedContinuation<Void, Never>?)>
  private let until: Int

  init(until: Int) {
    self.until = until
    state = Mutex((0, nil))
  }

  func add() {
    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
      state.count += 1
      guard state.count == until else { return nil }
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }

  func wait() async {
    await withCheckedContinuation { continuation in
      let done = state.withLock { state -> Bool in
        if state.count >= until { return true }
        state.waiter = continuation
        return false
      }
      if done { continuation.resume() }
    }
  }
}

/// The outbox's rows: appends (one at a time and batched) and delivery to a no-op handler,
/// each beside the plain GRDB code that does the same writes.
public let outboxScenarios: [Scenario] = [
  Scenario(
    name: "Outbox.append, one per transaction",
    baselineName: "GRDB INSERT, one per transaction, same settings",
    unit: .nanosecondsPerJob,
    target: .ratio(1.5),
    jobs: (2_000, 300),
    orderly: { jobs in try await outboxAppends(jobs, batch: 1) },
    baseline: { jobs in try await plainInserts(jobs, batch: 1) }
  ),
  Scenario(
    name: "Outbox.append(contentsOf:), 100 per transaction",
    baselineName: "GRDB INSERT, 100 per transaction",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (100_000, 10_000),
    orderly: { jobs in try await outboxAppends(jobs, batch: 100) },
    baseline: { jobs in try await plainInserts(jobs, batch: 100) }
  ),
  // What a unique key costs ("Appending once: unique keys"): the same appends, each with a key
  // of its own.
  Scenario(
    name: "Outbox.append with a unique key, one per transaction",
    baselineName: "Outbox.append, one per transaction",
    unit: .nanosecondsPerJob,
    target: .ratio(1.3),
    jobs: (2_000, 300),
    orderly: { jobs in try await outboxAppends(jobs, batch: 1, unique: true) },
    baseline: { jobs in try await outboxAppends(jobs, batch: 1) }
  ),
  Scenario(
    name: "Outbox.append(contentsOf:) with unique keys, 100 per transaction",
    baselineName: "Outbox.append(contentsOf:), 100 per transaction",
    unit: .nanosecondsPerJob,
    target: .ratio(1.3),
    jobs: (100_000, 10_000),
    orderly: { jobs in try await outboxAppends(jobs, batch: 100, unique: true) },
    baseline: { jobs in try await outboxAppends(jobs, batch: 100) }
  ),
  Scenario(
    name: "Outbox delivery to a no-op handler",
    baselineName: "GRDB: read the first row, decode, then delete it",
    unit: .nanosecondsPerJob,
    target: .ratio(2),
    jobs: (2_000, 300),
    orderly: { jobs in try await outboxDelivery(jobs) },
    baseline: { jobs in try await plainDrain(jobs) }
  ),
  // What the audit trail costs ("Auditing delivery"): the same delivery with the trail on.
  Scenario(
    name: "Outbox delivery to a no-op handler, audit trail on",
    baselineName: "the same delivery, audit trail off",
    unit: .nanosecondsPerJob,
    target: .ratio(1.25),
    jobs: (2_000, 300),
    orderly: { jobs in try await outboxDelivery(jobs, audit: true) },
    baseline: { jobs in try await outboxDelivery(jobs) }
  ),
  // The policy table's promise that a stuck key never slows the others ("Operating an
  // outbox"): the healthy keys' delivery beside 10 blocked keys, against the same without them.
  Scenario(
    name: "Outbox delivery over 1,000 keys, 10 of them blocked",
    baselineName: "the same delivery, no key blocked",
    unit: .nanosecondsPerJob,
    target: .ratio(1.1),
    jobs: (20_000, 3_000),
    orderly: { jobs in try await keyedDelivery(jobs, blocked: 10) },
    baseline: { jobs in try await keyedDelivery(jobs, blocked: 0) }
  ),
]
