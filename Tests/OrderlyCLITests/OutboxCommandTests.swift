import BuiltProducts
import Foundation
import GRDB
import OrderlyOutbox
import OrderlySQLite
import Synchronization
import Testing

/// A message of the fixture outbox.
private struct Change: Codable, Sendable {
  let note: String
  let text: String
}

/// A transient failure: retried.
private struct Offline: Error, CustomStringConvertible {
  var description: String { "the server did not answer" }
}

/// An outbox file with one key of each kind, as a deliverer left it.
///
/// - `note-1`: its first message is a dead letter ("422: title too long"), two wait behind it;
/// - `note-2`: paused, two messages waiting;
/// - `note-3`: its message failed once and waits an hour for its next attempt;
/// - `note-4`: delivered, gone.
private struct Fixture {
  let folder: ScratchFolder
  let path: String
  let deadLetter: UUID
  let retrying: UUID
  let pausedHead: UUID

  init() async throws {
    folder = try ScratchFolder()
    path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    let dead = try await outbox.append(
      Change(note: "1", text: "a title far too long"),
      partition: "note-1"
    )
    try await outbox.append(
      contentsOf: [Change(note: "1", text: "b"), Change(note: "1", text: "c")],
      partition: "note-1",
      headers: [:]
    )
    let pausedHead = try await outbox.append(
      Change(note: "2", text: "milk"),
      partition: "note-2",
      headers: ["traceparent": "00-1-2-01"]
    )
    try await outbox.append(Change(note: "2", text: "eggs"), partition: "note-2")
    let retrying = try await outbox.append(Change(note: "3", text: "x"), partition: "note-3")
    try await outbox.append(Change(note: "4", text: "y"), partition: "note-4")
    try await outbox.pause(partition: "note-2")
    try outbox.start(
      retry: try RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600), jitter: 0)
    ) { envelope in
      switch envelope.message.note {
      case "1": throw PermanentDeliveryFailure("server said 422: title too long")
      case "3": throw Offline()
      default: return
      }
    }
    // Waits for the deliverer to reach the state above (a condition, not a time).
    let deadline = ContinuousClock.now + .seconds(120)
    while ContinuousClock.now < deadline {
      let keys = try await outbox.keys()
      let one = keys.first { $0.partition == "note-1" }
      let three = keys.first { $0.partition == "note-3" }
      let four = keys.first { $0.partition == "note-4" }
      if one?.deadLetters == 1, three?.headAttempts == 1, four == nil { break }
      try await Task.sleep(for: .milliseconds(20))
    }
    await outbox.stop()
    try await outbox.close()
    deadLetter = dead
    self.retrying = retrying
    self.pausedHead = pausedHead
  }

  func run(_ arguments: [String]) async throws -> CLIResult {
    try await orderly(["outbox"] + arguments + ["--database", path])
  }

  func json(_ arguments: [String]) async throws -> Any {
    let result = try await run(arguments + ["--format", "json"])
    #expect(result.status == 0, "\(result.stderr)")
    return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
  }
}

@Suite("orderly outbox: reading an SQLite outbox")
struct OutboxCommandReadTests {
  @Test("keys lists the stuck keys first, each with why, and the moving ones after")
  func keys() async throws {
    let fixture = try await Fixture()
    let rows = try #require(try await fixture.json(["keys"]) as? [[String: Any]])
    let names = rows.map { $0["key"] as? String }
    #expect(names == ["note-1", "note-2", "note-3"])
    let stuck = rows.map { $0["stuck"] as? [String] ?? [] }
    #expect(stuck == [["atDeadLetter"], ["paused"], ["retrying"]])
    #expect(rows[0]["pending"] as? Int == 2)
    #expect(rows[0]["deadLetters"] as? Int == 1)
    #expect(rows[1]["next"] as? String == fixture.pausedHead.uuidString)
    #expect(rows[2]["nextAttempts"] as? Int == 1)
    #expect(rows.allSatisfy { $0["holder"] is NSNull })

    let text = try await fixture.run(["keys"])
    #expect(text.status == 0)
    let lines = text.stdout.split(separator: "\n").map(String.init)
    #expect(lines.first?.hasPrefix("KEY") == true)
    #expect(lines.count == 4)
    #expect(lines[1].hasPrefix("note-1") && lines[1].contains("waits at a dead letter"))
    #expect(lines[2].hasPrefix("note-2") && lines[2].contains("paused"))
    #expect(lines[3].hasPrefix("note-3") && lines[3].contains("retrying"))
    // Aligned: every row's WHY column starts where the heading's does.
    let column = try #require(lines[0].range(of: "WHY")).lowerBound.utf16Offset(in: lines[0])
    #expect(
      lines.dropFirst().allSatisfy {
        $0.count > column && $0[$0.index($0.startIndex, offsetBy: column - 1)] == " "
      }
    )

    let goOn = try #require(
      try await fixture.json(["keys", "--dead-letters", "go-on", "--stuck"]) as? [[String: Any]]
    )
    let goOnNames = goOn.map { $0["key"] as? String }
    #expect(goOnNames == ["note-2", "note-3"])
  }

  @Test("status counts pending, dead letters, paused, blocked and retrying keys, and the oldest")
  func status() async throws {
    let fixture = try await Fixture()
    let status = try #require(try await fixture.json(["status"]) as? [String: Any])
    #expect(status["store"] as? String == "sqlite")
    #expect(status["outbox"] as? String == fixture.path)
    #expect(status["pending"] as? Int == 5)
    #expect(status["deadLetters"] as? Int == 1)
    #expect(status["pausedKeys"] as? [String] == ["note-2"])
    #expect(status["blockedKeys"] as? [String] == ["note-1", "note-2"])
    #expect(status["retryingKeys"] as? [String] == ["note-3"])
    #expect(status["keysInFlight"] is NSNull)
    let oldest = try #require(status["oldestPending"] as? [String: Any])
    #expect(oldest["key"] as? String == "note-1")
    #expect(status["keys"] is NSNull)

    let perKey = try #require(try await fixture.json(["status", "--per-key"]) as? [String: Any])
    #expect((perKey["keys"] as? [Any])?.count == 3)

    let text = try await fixture.run(["status"])
    #expect(text.status == 0)
    #expect(text.stdout.contains("Pending:"))
    #expect(text.stdout.contains("Blocked keys:    2 (note-1, note-2)"))
  }

  @Test("dead-letters gives id, key, attempts, last error and when; peek shows the stored message")
  func deadLettersAndPeek() async throws {
    let fixture = try await Fixture()
    let letters = try #require(try await fixture.json(["dead-letters"]) as? [[String: Any]])
    #expect(letters.count == 1)
    #expect(letters.first?["id"] as? String == fixture.deadLetter.uuidString)
    #expect(letters.first?["key"] as? String == "note-1")
    #expect(letters.first?["attempts"] as? Int == 1)
    #expect(letters.first?["lastError"] as? String == "server said 422: title too long")
    #expect(letters.first?["failedAt"] is String)

    let text = try await fixture.run(["dead-letters"])
    #expect(text.stdout.contains(fixture.deadLetter.uuidString))
    #expect(text.stdout.contains("server said 422: title too long"))

    let peek = try await fixture.run(["peek", fixture.pausedHead.uuidString])
    #expect(peek.status == 0, "\(peek.stderr)")
    let object = try #require(
      try JSONSerialization.jsonObject(with: Data(peek.stdout.utf8)) as? [String: Any]
    )
    #expect(object["state"] as? String == "pending")
    #expect(object["key"] as? String == "note-2")
    #expect(object["headers"] as? [String: String] == ["traceparent": "00-1-2-01"])
    let message = try #require(object["message"] as? [String: String])
    #expect(message == ["note": "2", "text": "milk"])

    let dead = try #require(
      try await fixture.json(["peek", fixture.deadLetter.uuidString]) as? [String: Any]
    )
    #expect(dead["state"] as? String == "deadLetter")
    #expect(dead["reason"] as? String == "server said 422: title too long")
  }
}

@Suite("orderly outbox: changing an SQLite outbox")
struct OutboxCommandChangeTests {
  @Test("retry puts a dead letter back at the head of its key, and delivery goes on in order")
  func retry() async throws {
    let fixture = try await Fixture()
    let result = try await fixture.run(["retry", fixture.deadLetter.uuidString])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(result.stdout.contains("next in key note-1"))
    let rows = try #require(try await fixture.json(["keys"]) as? [[String: Any]])
    let one = try #require(rows.first { $0["key"] as? String == "note-1" })
    #expect(one["next"] as? String == fixture.deadLetter.uuidString)
    #expect(one["pending"] as? Int == 3)
    #expect(one["deadLetters"] as? Int == 0)

    // A worker delivers the key again, the retried message first.
    let outbox = try Outbox<Change>(path: fixture.path)
    let seen = Recorded()
    try outbox.start { envelope in
      if envelope.partition == "note-1" { seen.add(envelope.message.text) }
    }
    let deadline = ContinuousClock.now + .seconds(120)
    while seen.values.count < 3, ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(20))
    }
    await outbox.stop()
    try await outbox.close()
    #expect(seen.values == ["a title far too long", "b", "c"])
  }

  @Test("retry and resume while the app delivers: its running deliverer picks them up")
  func whileDelivering() async throws {
    let fixture = try await Fixture()
    let outbox = try Outbox<Change>(path: fixture.path)
    let seen = Recorded()
    try outbox.start(pollInterval: .milliseconds(20)) { envelope in
      seen.add(envelope.message.text)
    }
    // Once note-3 is delivered, the deliverer has read the file: note-1 waits at its dead
    // letter, note-2 is paused.
    let started = ContinuousClock.now + .seconds(120)
    while !seen.values.contains("x"), ContinuousClock.now < started {
      try await Task.sleep(for: .milliseconds(20))
    }
    #expect(seen.values == ["x"])
    let retried = try await fixture.run(["retry", fixture.deadLetter.uuidString])
    #expect(retried.status == 0, "\(retried.stderr)")
    let resumed = try await fixture.run(["resume", "note-2"])
    #expect(resumed.status == 0, "\(resumed.stderr)")
    let deadline = ContinuousClock.now + .seconds(120)
    while seen.values.count < 6, ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(20))
    }
    await outbox.stop()
    try await outbox.close()
    let values = seen.values
    #expect(
      values.filter { ["a title far too long", "b", "c"].contains($0) } == [
        "a title far too long", "b", "c",
      ]
    )
    #expect(values.filter { ["milk", "eggs"].contains($0) } == ["milk", "eggs"])
  }

  @Test("drop removes a dead letter; its key goes on with the message after it")
  func drop() async throws {
    let fixture = try await Fixture()
    let result = try await fixture.run(["drop", fixture.deadLetter.uuidString])
    #expect(result.status == 0, "\(result.stderr)")
    let letters = try #require(try await fixture.json(["dead-letters"]) as? [Any])
    #expect(letters.isEmpty)
    let rows = try #require(try await fixture.json(["keys"]) as? [[String: Any]])
    let one = try #require(rows.first { $0["key"] as? String == "note-1" })
    #expect(one["stuck"] as? [String] == [])
    #expect(one["pending"] as? Int == 2)
  }

  @Test("a quarantined key: keys lists it first with why; resume KEY lets it go, from its message")
  func quarantined() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    try await outbox.append(Change(note: "9", text: "poison"), partition: "note-9")
    try await outbox.append(Change(note: "1", text: "fine"), partition: "note-1")
    var options = OutboxDeliveryOptions(
      retry: try RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
    )
    options.quarantine = QuarantinePolicy(afterFailedAttempts: 2)
    let events = outbox.events
    try outbox.start(
      options,
      deliver: .each { envelope in
        if envelope.message.note == "9" { throw Offline() }
      }
    )
    for await event in events {
      if case .quarantined = event { break }
    }
    await outbox.stop()
    try await outbox.close()
    func run(_ arguments: [String]) async throws -> CLIResult {
      try await orderly(["outbox"] + arguments + ["--database", path])
    }
    let json = try await run(["keys", "--format", "json"])
    #expect(json.status == 0, "\(json.stderr)")
    let rows = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
    )
    let reason =
      "its first message failed 2 time(s) in a row; last error: the server did not answer"
    #expect(rows.first?["key"] as? String == "note-9")
    #expect(rows.first?["stuck"] as? [String] == ["quarantined", "retrying"])
    #expect(rows.first?["quarantine"] as? String == reason)
    let text = try await run(["keys"])
    #expect(text.stdout.contains("quarantined (resume it once fixed): \(reason)"))
    let status = try await run(["status", "--format", "json"])
    let counts = try #require(
      try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
    )
    #expect(counts["quarantinedKeys"] as? [String] == ["note-9"])
    #expect(counts["pausedKeys"] as? [String] == ["note-9"])
    let statusText = try await run(["status"])
    #expect(statusText.stdout.contains("Quarantined:     1 (note-9)"))
    let resumed = try await run(["resume", "note-9"])
    #expect(resumed.status == 0, "\(resumed.stderr)")
    let after = try await run(["keys", "--format", "json"])
    let afterRows = try #require(
      try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]]
    )
    #expect(afterRows.first?["stuck"] as? [String] == ["retrying"])
    #expect(afterRows.first?["quarantine"] is NSNull)
  }

  @Test("schedules: listed with their next tick (text and JSON); pause, resume, remove by name")
  func schedules() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    try await outbox.schedules.set(
      OutboxSchedule(
        "nightly",
        .cron("0 2 * * *", timeZone: try #require(TimeZone(identifier: "Europe/Paris"))),
        partition: "digests",
        message: Change(note: "0", text: "digest"),
        missedTicks: .catchUpOnce
      )
    )
    try await outbox.schedules.set(
      OutboxSchedule(
        "heartbeat",
        .every(.seconds(90)),
        partition: nil,
        message: Change(note: "h", text: "")
      )
    )
    try await outbox.close()
    func run(_ arguments: [String]) async throws -> CLIResult {
      try await orderly(["outbox"] + arguments + ["--database", path])
    }
    let json = try await run(["schedules", "--format", "json"])
    #expect(json.status == 0, "\(json.stderr)")
    let rows = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
    )
    #expect(rows.map { $0["name"] as? String } == ["heartbeat", "nightly"])
    #expect(rows.last?["timing"] as? String == "cron 0 2 * * * (Europe/Paris)")
    #expect(rows.last?["key"] as? String == "digests")
    #expect(rows.first?["key"] is NSNull)
    #expect(rows.first?["timing"] as? String == "every 90 seconds")
    #expect(rows.last?["missedTicks"] as? String == "catch-up-once")
    #expect(rows.first?["lastTick"] is NSNull && rows.first?["problem"] is NSNull)
    let next = try #require(rows.last?["nextTick"] as? String)
    // 2:00 in Paris is 00:00 or 01:00 UTC, by the season.
    #expect(next.hasSuffix("T01:00:00Z") || next.hasSuffix("T00:00:00Z"), "\(next)")
    let text = try await run(["schedules"])
    #expect(text.stdout.contains("NAME") && text.stdout.contains("every 90 seconds"))
    #expect(text.stdout.contains("(default)"))

    let paused = try await run(["schedules", "pause", "nightly"])
    #expect(paused.status == 0, "\(paused.stderr)")
    let status = try await run(["status", "--format", "json"])
    let counts = try #require(
      try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
    )
    #expect(counts["schedules"] as? [String] == ["heartbeat", "nightly"])
    #expect(counts["pausedSchedules"] as? [String] == ["nightly"])
    let statusText = try await run(["status"])
    #expect(
      statusText.stdout.contains("Schedules:       2 (1 paused: nightly)"),
      "\(statusText.stdout)"
    )
    let again = try await run(["schedules", "pause", "nightly"])
    #expect(again.status == 1 && again.stderr.contains("already paused; nothing changed"))
    let listed = try await run(["schedules", "list"])
    #expect(listed.stdout.contains("paused"))
    let resumed = try await run(["schedules", "resume", "nightly"])
    #expect(resumed.status == 0 && resumed.stdout.contains("its next tick is"), "\(resumed.stderr)")
    let removed = try await run(["schedules", "remove", "heartbeat"])
    #expect(removed.status == 0, "\(removed.stderr)")
    let unknown = try await run(["schedules", "remove", "heartbeat"])
    #expect(unknown.status == 1 && unknown.stderr.contains("no schedule is named 'heartbeat'"))
    let left = try await run(["schedules", "--format", "json"])
    let leftRows = try #require(
      try JSONSerialization.jsonObject(with: Data(left.stdout.utf8)) as? [[String: Any]]
    )
    #expect(leftRows.map { $0["name"] as? String } == ["nightly"])
    #expect(leftRows.first?["paused"] as? Bool == false)
  }

  @Test("a rate-limited key: keys and status say until when it waits (text and JSON)")
  func rateLimited() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    try await outbox.append(Change(note: "5", text: "a"), partition: "note-5")
    try await outbox.append(Change(note: "5", text: "b"), partition: "note-5")
    var options = OutboxDeliveryOptions()
    // A day's window: the key's second message waits until midnight UTC.
    options.rateLimits = [try RateLimit(1, per: .seconds(86_400), keys: .each)]
    let events = outbox.events
    let day = Int(Date().timeIntervalSince1970 / 86_400)
    try outbox.start(options, deliver: .each { _ in })
    for await event in events {
      if case .delivered = event { break }
    }
    await outbox.stop()
    try await outbox.close()
    guard Int(Date().timeIntervalSince1970 / 86_400) == day else {
      Issue.record("the test ran across midnight UTC: a new window began; not checked")
      return
    }
    func run(_ arguments: [String]) async throws -> CLIResult {
      try await orderly(["outbox"] + arguments + ["--database", path])
    }
    let json = try await run(["keys", "--format", "json"])
    let rows = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
    )
    let formatter = ISO8601DateFormatter()
    let midnight = formatter.string(from: Date(timeIntervalSince1970: Double(day + 1) * 86_400))
    #expect(rows.first?["key"] as? String == "note-5")
    #expect(rows.first?["stuck"] as? [String] == ["rateLimited"])
    #expect(rows.first?["rateLimitedUntil"] as? String == midnight)
    let text = try await run(["keys"])
    #expect(text.stdout.contains("rate limited until \(midnight)"), "\(text.stdout)")
    let status = try await run(["status", "--format", "json"])
    let counts = try #require(
      try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
    )
    #expect(counts["rateLimitedKeys"] as? [String] == ["note-5"])
    let statusText = try await run(["status"])
    #expect(statusText.stdout.contains("Rate limited:    1 (note-5)"), "\(statusText.stdout)")
  }

  @Test("pause and resume a key")
  func pauseAndResume() async throws {
    let fixture = try await Fixture()
    let resumed = try await fixture.run(["resume", "note-2"])
    #expect(resumed.status == 0, "\(resumed.stderr)")
    let paused = try await fixture.run(["pause", "note-3"])
    #expect(paused.status == 0, "\(paused.stderr)")
    let status = try #require(try await fixture.json(["status"]) as? [String: Any])
    #expect(status["pausedKeys"] as? [String] == ["note-3"])
  }
}

/// Values a handler records, in order.
private final class Recorded: Sendable {
  private let storage = Mutex<[String]>([])
  func add(_ value: String) { storage.withLock { $0.append(value) } }
  var values: [String] { storage.withLock { $0 } }
}

@Suite("orderly outbox groups", .timeLimit(.minutes(3)))
struct OutboxGroupsCommandTests {
  @Test("groups: the keys by fair-share group, each key in its longest prefix's (text and JSON)")
  func groups() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    for (key, count) in [
      ("acme:1", 2), ("acme:2", 1), ("acme:vip:1", 1), ("tiny:1", 3), ("loose", 1),
    ] {
      try await outbox.append(
        contentsOf: (0..<count).map { Change(note: key, text: "\($0)") },
        partition: key,
        headers: [:]
      )
    }
    try await outbox.append(Change(note: "-", text: "default"), partition: nil)
    try await outbox.pause(partition: "tiny:1")
    try await outbox.close()
    func run(_ arguments: [String]) async throws -> CLIResult {
      try await orderly(["outbox", "groups"] + arguments + ["--database", path])
    }
    let json = try await run(["acme:=3", "tiny:", "acme:vip:=5", "--format", "json"])
    #expect(json.status == 0, "\(json.stderr)")
    let rows = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
    )
    #expect(rows.map { $0["prefix"] as? String } == ["acme:", "tiny:", "acme:vip:", nil])
    #expect(rows.last?["prefix"] is NSNull)
    #expect(rows.map { $0["weight"] as? Int } == [3, 1, 5, 1])
    #expect(rows.map { $0["keys"] as? Int } == [2, 1, 1, 2])
    #expect(rows.map { $0["pending"] as? Int } == [3, 3, 1, 2])
    #expect(rows.map { $0["stuck"] as? Int } == [0, 1, 0, 0])
    #expect(rows.map { $0["sharePercent"] as? Double } == [30, 10, 50, 10])
    #expect(rows.allSatisfy { $0["oldestPendingAppendedAt"] is String })
    let text = try await run(["acme:=3", "tiny:", "acme:vip:=5"])
    #expect(text.stdout.hasPrefix("GROUP"), "\(text.stdout)")
    #expect(text.stdout.contains("(other keys)"))

    let zero = try await run(["acme:=0"])
    #expect(zero.status == 64 && zero.stderr.contains("a weight is 1 to 1000"), "\(zero.stderr)")
    let word = try await run(["acme:=three"])
    #expect(word.status == 64 && word.stderr.contains("is not PREFIX=WEIGHT"), "\(word.stderr)")
    let twice = try await run(["acme:", "acme:=2"])
    #expect(twice.status == 64 && twice.stderr.contains("named twice"), "\(twice.stderr)")
  }
}
