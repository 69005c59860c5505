import Foundation
import OrderlyOutboxCore

/// The message type `orderly outbox` opens an outbox with: it knows nothing of the
/// application's messages, so it decodes any payload and never encodes one (the command only
/// reads payloads as stored, and never appends).
struct OperatorMessage: Codable, Sendable {
  init(from decoder: any Decoder) throws {}

  func encode(to encoder: any Encoder) throws {
    throw EncodingError.invalidValue(
      self,
      .init(codingPath: [], debugDescription: "orderly outbox never appends a message")
    )
  }
}

/// What `orderly outbox` prints: text for a terminal, JSON for scripts.
///
/// The JSON is stable: keys sorted, dates in ISO 8601 (UTC), the default line's key `null`, and
/// a field is added, never renamed or removed, within a major version. The outbox's DocC article
/// ("Operating an outbox") documents each field.
enum OperatorReport {
  /// How the default line is shown, and typed as a KEY.
  static let defaultLine = "(default)"

  static func shown(_ partition: String?) -> String { partition ?? defaultLine }

  static func noSuchMessage(_ id: UUID) -> String {
    "the outbox holds no message \(id.uuidString) (it was delivered or dropped, or the id is "
      + "wrong); see `orderly outbox dead-letters` and `orderly outbox keys`"
  }

  static func noSuchKey(_ partition: String?) -> String {
    "the outbox has no key \(shown(partition)) (no pending message, dead letter or pause); "
      + "see `orderly outbox keys`"
  }

  /// A URL as shown in a report: without its password.
  static func withoutPassword(_ url: String) -> String {
    guard var parts = URLComponents(string: url), parts.password != nil else { return url }
    parts.password = nil
    return parts.string ?? url
  }

  // MARK: - JSON

  static func json(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    guard let data = try? encoder.encode(value) else { return "{}" }
    return String(decoding: data, as: UTF8.self)
  }

  // MARK: - Time

  static func stamp(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: date)
  }

  /// An age for a terminal: `42 s`, `3 min 20 s`, `2 h 5 min`, `3 d 4 h`.
  static func age(_ seconds: TimeInterval) -> String {
    let total = max(0, Int(seconds.rounded(.down)))
    switch total {
    case ..<60: return "\(total) s"
    case ..<3600: return "\(total / 60) min \(total % 60) s"
    case ..<86_400: return "\(total / 3600) h \(total % 3600 / 60) min"
    default: return "\(total / 86_400) d \(total % 86_400 / 3600) h"
    }
  }

  /// Rows as aligned columns; the first row is the heading.
  static func table(_ rows: [[String]]) -> String {
    guard let first = rows.first else { return "" }
    var widths = Array(repeating: 0, count: first.count)
    for row in rows {
      for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    return rows.map { row in
      row.enumerated().map { index, cell in
        index == row.count - 1
          ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
      }.joined(separator: "  ")
    }.joined(separator: "\n")
  }

  // MARK: - Keys

  /// One key, as `keys` and `status --per-key` print it.
  struct KeyRow: Encodable {
    /// The partition key; `null` for the default line.
    @NullWhenAbsent var key: String?
    let pending: Int
    let deadLetters: Int
    let paused: Bool
    /// The next message's id; `null` when none is pending.
    @NullWhenAbsent var next: UUID?
    /// Failed attempts of the next message.
    let nextAttempts: Int
    /// When the next message may be delivered, if it was appended with a not-before time.
    @NullWhenAbsent var nextNotBefore: Date?
    @NullWhenAbsent var oldestPendingAppendedAt: Date?
    @NullWhenAbsent var oldestDeadLetterFailedAt: Date?
    /// Why the key does not move, strongest first.
    ///
    /// Each is one of `quarantined`, `atDeadLetter`, `paused`, `scheduled`, `retrying`,
    /// `leaseEnded`; empty for a key that moves.
    let stuck: [String]
    /// The same, in words.
    let why: String
    /// PostgreSQL: the worker holding the key's lease; `null` when none does (always for SQLite).
    @NullWhenAbsent var holder: Holder?
    /// Why delivery quarantined the key (it stays paused until resumed); `null` when it was not.
    @NullWhenAbsent var quarantine: String?
    /// When a rate limit that counts the key lets it go on; `null` when none holds it.
    @NullWhenAbsent var rateLimitedUntil: Date?

    struct Holder: Encodable {
      let worker: String
      let leaseExpiresAt: Date
      let fence: Int64
    }

    init(_ key: OutboxKey, policy: DeadLetterPolicy, now: Date) {
      self.key = key.partition
      pending = key.pending
      deadLetters = key.deadLetters
      paused = key.paused
      next = key.head
      nextAttempts = key.headAttempts
      nextNotBefore = key.headNotBefore
      oldestPendingAppendedAt = key.oldestPendingAppendedAt
      oldestDeadLetterFailedAt = key.oldestDeadLetterFailedAt
      let reasons = key.stuck(onDeadLetter: policy, at: now)
      stuck = reasons.map(Self.name)
      why =
        reasons.isEmpty
        ? (key.pending > 0 ? "moving" : "idle") : reasons.map(\.summary).joined(separator: "; ")
      holder = key.holder.map {
        Holder(worker: $0.owner, leaseExpiresAt: $0.leaseExpiresAt, fence: $0.fence)
      }
      quarantine = key.paused ? key.quarantine : nil
      rateLimitedUntil =
        key.pending > 0 ? key.rateLimitedUntil.flatMap { $0 > now ? $0 : nil } : nil
    }

    static func name(_ reason: OutboxKeyStuck) -> String {
      switch reason {
      case .atDeadLetter: "atDeadLetter"
      case .paused: "paused"
      case .scheduled: "scheduled"
      case .retrying: "retrying"
      case .leaseEnded: "leaseEnded"
      case .quarantined: "quarantined"
      case .rateLimited: "rateLimited"
      }
    }
  }

  static func text(_ rows: [KeyRow], now: Date) -> String {
    guard !rows.isEmpty else { return "No keys: nothing pending, no dead letters, no pauses." }
    let showsHolders = rows.contains { $0.holder != nil }
    var table: [[String]] = [
      ["KEY", "PENDING", "DEAD", "OLDEST"] + (showsHolders ? ["HELD BY", "LEASE", "FENCE"] : [])
        + ["WHY"]
    ]
    for row in rows {
      let oldest = [row.oldestPendingAppendedAt, row.oldestDeadLetterFailedAt].compactMap { $0 }
        .min()
      var cells = [
        shown(row.key), "\(row.pending)", "\(row.deadLetters)",
        oldest.map { age(now.timeIntervalSince($0)) } ?? "-",
      ]
      if showsHolders {
        cells += [
          row.holder?.worker ?? "-",
          row.holder.map { lease($0.leaseExpiresAt, now: now) } ?? "-",
          row.holder.map { "\($0.fence)" } ?? "-",
        ]
      }
      table.append(cells + [row.why])
    }
    return self.table(table)
  }

  static func lease(_ expiry: Date, now: Date) -> String {
    let left = expiry.timeIntervalSince(now)
    return left >= 0 ? "ends in \(age(left))" : "ended \(age(-left)) ago"
  }

  // MARK: - Status

  struct Status: Encodable {
    /// `sqlite` or `postgresql`.
    let store: String
    /// The file, or the URL without its password.
    let outbox: String
    let pending: Int
    /// Keys a worker holds a live lease on now (PostgreSQL).
    ///
    /// `null` for SQLite: one process delivers a file, and what it holds is not stored.
    @NullWhenAbsent var keysInFlight: Int?
    let deadLetters: Int
    let pausedKeys: [String?]
    /// Paused keys that delivery quarantined (`QuarantinePolicy`), in the order `keys` lists them.
    let quarantinedKeys: [String?]
    /// Keys that do not move until someone acts (a dead letter under `stop-line`, a pause).
    let blockedKeys: [String?]
    let retryingKeys: [String?]
    /// Keys whose next message waits for its not-before time.
    let scheduledKeys: [String?]
    /// Keys a rate limit holds until its window ends.
    let rateLimitedKeys: [String?]
    @NullWhenAbsent var oldestPending: Oldest?
    /// PostgreSQL: each worker holding keys; empty for SQLite.
    let workers: [Worker]
    /// The recurring schedules' names (`orderly outbox schedules` lists them in full).
    let schedules: [String]
    /// The schedules paused (by `schedules pause`, or in code).
    let pausedSchedules: [String]
    /// With `--per-key`: every key, as `keys` prints it.
    @NullWhenAbsent var keys: [KeyRow]?
    let deadLetterPolicy: String
    let at: Date

    struct Oldest: Encodable {
      @NullWhenAbsent var key: String?
      @NullWhenAbsent var next: UUID?
      let appendedAt: Date
      let ageSeconds: Double
    }

    struct Worker: Encodable {
      let worker: String
      let keys: Int
      let earliestLeaseExpiry: Date
      let highestFence: Int64
    }

    init(
      target: (store: String, name: String),
      counts: OutboxCounts,
      keys: [OutboxKey],
      policy: DeadLetterPolicy,
      perKey: Bool,
      schedules: [OutboxScheduleInfo] = [],
      now: Date
    ) {
      self.schedules = schedules.map(\.name)
      pausedSchedules = schedules.filter(\.isPaused).map(\.name)
      store = target.store
      outbox = target.name
      pending = counts.pending
      deadLetters = counts.deadLetters
      let sorted = keys.sortedForOperator(onDeadLetter: policy, at: now)
      pausedKeys = sorted.filter(\.paused).map(\.partition)
      quarantinedKeys = sorted.filter { $0.paused && $0.quarantine != nil }.map(\.partition)
      blockedKeys = sorted.filter {
        $0.paused || ($0.deadLetters > 0 && policy == .stopLine)
      }.map(\.partition)
      retryingKeys = sorted.filter { $0.pending > 0 && $0.headAttempts > 0 }.map(\.partition)
      scheduledKeys = sorted.filter { key in
        key.pending > 0 && key.headNotBefore.map { $0 > now } == true
      }.map(\.partition)
      rateLimitedKeys = sorted.filter { key in
        key.pending > 0 && key.rateLimitedUntil.map { $0 > now } == true
      }.map(\.partition)
      let oldestKey = keys.filter { $0.oldestPendingAppendedAt != nil }
        .min { ($0.oldestPendingAppendedAt ?? now) < ($1.oldestPendingAppendedAt ?? now) }
      oldestPending = oldestKey.flatMap { key in
        key.oldestPendingAppendedAt.map {
          Oldest(
            key: key.partition,
            next: key.head,
            appendedAt: $0,
            ageSeconds: max(0, now.timeIntervalSince($0))
          )
        }
      }
      var byWorker: [String: [OutboxKeyHolder]] = [:]
      for key in keys {
        if let holder = key.holder, holder.leaseExpiresAt > now {
          byWorker[holder.owner, default: []].append(holder)
        }
      }
      workers = byWorker.keys.sorted().map { name in
        let held = byWorker[name] ?? []
        return Worker(
          worker: name,
          keys: held.count,
          earliestLeaseExpiry: held.map(\.leaseExpiresAt).min() ?? now,
          highestFence: held.map(\.fence).max() ?? 0
        )
      }
      keysInFlight = target.store == "sqlite" ? nil : workers.reduce(0) { $0 + $1.keys }
      self.keys = perKey ? sorted.map { KeyRow($0, policy: policy, now: now) } : nil
      deadLetterPolicy = policy == .stopLine ? "stop-line" : "go-on"
      at = now
    }

    var text: String {
      func list(_ keys: [String?]) -> String {
        keys.isEmpty
          ? ""
          : " (" + keys.prefix(5).map(shown).joined(separator: ", ")
            + (keys.count > 5 ? ", ..." : "") + ")"
      }
      var rows: [[String]] = [
        ["Outbox", "\(outbox) (\(store == "sqlite" ? "SQLite" : "PostgreSQL"))"],
        ["Pending", "\(pending)"],
        [
          "In flight",
          keysInFlight.map { "\($0) key(s) held by \(workers.count) worker(s)" }
            ?? "not stored (one process delivers an SQLite file)",
        ],
        ["Dead letters", "\(deadLetters)"],
        ["Paused keys", "\(pausedKeys.count)\(list(pausedKeys))"],
      ]
      // Shown only when there are some: an outbox without a quarantine policy never has any.
      if !quarantinedKeys.isEmpty {
        rows.append(["Quarantined", "\(quarantinedKeys.count)\(list(quarantinedKeys))"])
      }
      rows += [
        [
          "Blocked keys",
          "\(blockedKeys.count)\(list(blockedKeys))"
            + (deadLetterPolicy == "stop-line" ? "" : " (dead letters do not block: go-on)"),
        ],
        ["Retrying keys", "\(retryingKeys.count)\(list(retryingKeys))"],
        ["Scheduled keys", "\(scheduledKeys.count)\(list(scheduledKeys))"],
      ]
      // Shown only when there are some, as quarantined keys: an outbox without rate limits
      // never has any.
      if !rateLimitedKeys.isEmpty {
        rows.append(["Rate limited", "\(rateLimitedKeys.count)\(list(rateLimitedKeys))"])
      }
      if !schedules.isEmpty {
        rows.append([
          "Schedules",
          "\(schedules.count)"
            + (pausedSchedules.isEmpty
              ? ""
              : " (\(pausedSchedules.count) paused: \(pausedSchedules.prefix(5).joined(separator: ", ")))"),
        ])
      }
      rows += [
        [
          "Oldest pending",
          oldestPending.map {
            "\(age($0.ageSeconds)) old, key \(shown($0.key)), appended \(stamp($0.appendedAt))"
          } ?? "none",
        ]
      ]
      for worker in workers {
        rows.append([
          "Worker",
          "\(worker.worker): \(worker.keys) key(s), lease \(lease(worker.earliestLeaseExpiry, now: at)), "
            + "fence up to \(worker.highestFence)",
        ])
      }
      var text = table(rows.map { [$0[0] + ":", $0[1]] })
      if let keys { text += "\n\n" + OperatorReport.text(keys, now: at) }
      return text
    }
  }

  // MARK: - Dead letters

  struct DeadLetterRow: Encodable {
    let id: UUID
    /// The partition key; `null` for the default line.
    @NullWhenAbsent var key: String?
    let attempts: Int
    /// The error of its last attempt, as the handler threw it (or why it could not be decoded).
    let lastError: String
    let failedAt: Date
    let appendedAt: Date

    init(_ letter: DeadLetter<OperatorMessage>) {
      id = letter.id
      key = letter.partition
      attempts = letter.attempts
      lastError = letter.reason
      failedAt = letter.failedAt
      appendedAt = letter.appendedAt
    }
  }

  static func text(_ rows: [DeadLetterRow]) -> String {
    guard !rows.isEmpty else { return "No dead letters." }
    var table: [[String]] = [["ID", "KEY", "ATTEMPTS", "FAILED AT", "LAST ERROR"]]
    for row in rows {
      table.append([
        row.id.uuidString, shown(row.key), "\(row.attempts)", stamp(row.failedAt),
        row.lastError.replacingOccurrences(of: "\n", with: " "),
      ])
    }
    return self.table(table)
  }

  // MARK: - Peek

  struct Peek: Encodable {
    let id: UUID
    @NullWhenAbsent var key: String?
    let sequence: Int64
    /// `pending` or `deadLetter`.
    let state: String
    let attempts: Int
    let appendedAt: Date
    /// The earliest time it may be delivered, if it was appended with one.
    @NullWhenAbsent var notBefore: Date?
    let headers: [String: String]
    /// The stored message, as JSON; `null` when the payload is not JSON (see `payloadBase64`).
    @NullWhenAbsent var message: JSONValue?
    /// The payload's bytes, only when they are not JSON.
    @NullWhenAbsent var payloadBase64: String?
    @NullWhenAbsent var failedAt: Date?
    @NullWhenAbsent var reason: String?
    /// The unique key it holds while pending, if it was appended with one.
    @NullWhenAbsent var uniqueKey: String?

    init(_ stored: OutboxStoredMessage) {
      id = stored.id
      key = stored.partition
      sequence = stored.sequence
      state = stored.deadLetter == nil ? "pending" : "deadLetter"
      attempts = stored.attempts
      appendedAt = stored.appendedAt
      notBefore = stored.notBefore
      headers = stored.headers
      message = try? JSONDecoder().decode(JSONValue.self, from: stored.payload)
      payloadBase64 = message == nil ? stored.payload.base64EncodedString() : nil
      failedAt = stored.deadLetter?.failedAt
      reason = stored.deadLetter?.reason
      uniqueKey = stored.uniqueKey
    }

    var text: String {
      var rows: [[String]] = [
        ["Id", id.uuidString],
        ["Key", shown(key)],
        ["Place", "\(sequence)"],
        ["State", state == "pending" ? "pending" : "dead letter"],
        ["Attempts", "\(attempts)"],
        ["Appended", stamp(appendedAt)],
      ]
      if let notBefore { rows.append(["Not before", stamp(notBefore)]) }
      if let uniqueKey { rows.append(["Unique key", uniqueKey]) }
      if let failedAt, let reason {
        rows.append(["Failed", stamp(failedAt)])
        rows.append(["Reason", reason])
      }
      for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
        rows.append(["Header", "\(name): \(value)"])
      }
      let body = message.map(OperatorReport.json) ?? "(not JSON; base64) \(payloadBase64 ?? "")"
      return table(rows.map { [$0[0] + ":", $0[1]] }) + "\nMessage:\n" + body
    }
  }
}

/// Any JSON value, decoded and encoded again as it was (object keys sorted).
enum JSONValue: Codable, Equatable {
  case null
  case bool(Bool)
  case number(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let value = try? container.decode(Bool.self) {
      self = .bool(value)
    } else if let value = try? container.decode(Double.self) {
      self = .number(value)
    } else if let value = try? container.decode(String.self) {
      self = .string(value)
    } else if let value = try? container.decode([JSONValue].self) {
      self = .array(value)
    } else {
      self = .object(try container.decode([String: JSONValue].self))
    }
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .null: try container.encodeNil()
    case .bool(let value): try container.encode(value)
    case .number(let value):
      // Whole numbers print without a fraction, as they were stored.
      if value.rounded() == value, abs(value) < 1e15 {
        try container.encode(Int64(value))
      } else {
        try container.encode(value)
      }
    case .string(let value): try container.encode(value)
    case .array(let value): try container.encode(value)
    case .object(let value): try container.encode(value)
    }
  }
}

/// An optional field that JSON shows as `null` when absent, rather than leaving it out: every
/// documented field is in every object.
@propertyWrapper
struct NullWhenAbsent<Value: Encodable>: Encodable {
  var wrappedValue: Value?

  init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
  }
}
