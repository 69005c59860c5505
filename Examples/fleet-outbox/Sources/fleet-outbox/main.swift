// Order across processes: three worker processes share one outbox on PostgreSQL, each running
// its delivery as a service in a ServiceGroup. Worker A is killed with SIGKILL in the middle of
// a delivery: its keys wait until its leases run out. Worker B gets SIGTERM in the middle of a
// delivery: it finishes it and lets its key go at once. Worker C carries every key on, in order.
// Then the audit trail every worker wrote is checked, and a late write under A's fence is
// refused by the receiver's fence table.
//
//   swift run --package-path Examples/fleet-outbox fleet-outbox
//
// It uses the server ORDERLY_POSTGRES_URL names, or the throwaway one Tools/postgres/cluster.sh
// runs, or starts one with that script (and stops it at the end). `fleet-outbox worker NAME
// LIMIT URL SCHEMA` is one worker: the story starts three.
import Foundation
import Logging
import OrderlyPostgres
import OrderlyServer
import PostgresNIO
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// A change to one customer's account: `number` counts messages across every key (#1-#6 are
/// alice's, #7-#12 bob's, #13-#18 carol's).
struct Change: Codable, Sendable {
  let key: String
  let number: Int
}

let keys = ["alice", "bob", "carol"]
let perKey = 6
/// The message of each key its first worker is stopped in the middle of.
let stalled = 4
let lease = Duration.seconds(3)

nonisolated var quiet: Logger {
  var logger = Logger(label: "fleet-outbox")
  logger.logLevel = .critical
  return logger
}

func say(_ line: String = "") {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ text: String) -> Never {
  FileHandle.standardError.write(Data(("fleet-outbox: " + text + "\n").utf8))
  exit(1)
}

/// A running client whose `search_path` is `schema`.
func client(url: String, schema: String) throws -> PostgresClient {
  var configuration = try PostgresClient.Configuration(orderlyURL: url)
  configuration.options.additionalStartupParameters = [("search_path", schema)]
  let client = PostgresClient(configuration: configuration, backgroundLogger: quiet)
  Task { await client.run() }
  return client
}

/// Writes one line of the receiver's log, at the database's clock.
func record(
  _ client: PostgresClient,
  worker: String,
  key: String,
  number: Int,
  fence: Int64,
  event: String
) async throws {
  try await client.query(
    """
    INSERT INTO receiver_log (worker, key, number, fence, event)
    VALUES (\(worker), \(key), \(number), \(fence), \(event))
    """,
    logger: quiet
  )
}

/// The receiver's fences: the last fence written per key, checked first in each write.
let fences: PostgresFences = {
  do {
    return try PostgresFences()
  } catch {
    fail("\(error)")
  }
}()

// MARK: - One worker

// course: the worker
/// Delivers as an `OutboxService` in a `ServiceGroup` until SIGTERM: the service then takes no
/// new message, lets the delivery in flight finish (up to 10 seconds), and releases its keys.
///
/// The receiver logs each delivery as it begins and ends, and applies each change once, by its
/// id, in a transaction that first writes the delivery's fence for its key: a worker whose
/// lease has moved on cannot write after the key's next holder. Every attempt is recorded in
/// the audit trail. Worker A never finishes a key's fourth change; worker B finishes its key's
/// fourth change only once it has been sent SIGTERM, so that the signal comes in the middle of
/// a delivery.
func work(name: String, limit: Int, url: String, schema: String) async throws -> Never {
  let client = try client(url: url, schema: schema)
  let outbox = try await PostgresOutbox<Change>(client: client, logger: quiet)
  var options = FleetDeliveryOptions(limit: limit, lease: lease, pollInterval: .milliseconds(100))
  options.audit = .on
  let delivery = OutboxService(
    outbox: outbox,
    name: "accounts",
    options: options,
    shutdownGracePeriod: .seconds(10),
    logger: quiet
  ) { envelope in
    let change = envelope.message
    let fence = envelope.fence ?? 0
    try await record(
      client,
      worker: name,
      key: change.key,
      number: change.number,
      fence: fence,
      event: "delivering"
    )
    if (change.number - 1) % perKey + 1 == stalled {
      if name == "A" {
        // Killed here: this delivery never ends.
        try await Task.sleep(for: .seconds(3_600))
      } else if name == "B" {
        // The receiver answers once B has been told to stop, a moment later.
        while try await count(client, "SELECT count(*)::bigint FROM story_cue WHERE name = 'B'")
          == 0
        {
          try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(200))
      }
    }
    // Each change takes the receiver a moment, as a call to another service would: long enough
    // that a worker's run of deliveries shows as a bar in the picture, not a sliver.
    try await Task.sleep(for: .milliseconds(60))
    try await apply(envelope, by: name, client: client)
  }
  let group = ServiceGroup(services: [delivery], gracefulShutdownSignals: [.sigterm], logger: quiet)
  say("ready")
  try await group.run()
  await outbox.close()
  exit(0)
}

/// The receiver's write: the fence first (refused with `StaleFence` if the key's next holder
/// wrote since), then the change, once by its id, in one transaction.
func apply(_ envelope: Envelope<Change>, by worker: String, client: PostgresClient) async throws {
  let change = envelope.message
  try await client.withTransaction(logger: quiet) { connection in
    try await fences.admit(envelope, on: connection, logger: quiet)
    try await connection.query(
      "INSERT INTO receiver_applied (id) VALUES (\(envelope.id)) ON CONFLICT DO NOTHING",
      logger: quiet
    )
    try await connection.query(
      """
      INSERT INTO receiver_log (worker, key, number, fence, event)
      VALUES (\(worker), \(change.key), \(change.number), \(envelope.fence ?? 0), 'delivered')
      """,
      logger: quiet
    )
  }
}
// course end: the worker

// MARK: - The story

/// The server: ORDERLY_POSTGRES_URL, the throwaway cluster already running, or one this run
/// starts (and `script` then stops at the end).
func server() -> (url: String, script: String?) {
  if let url = ProcessInfo.processInfo.environment["ORDERLY_POSTGRES_URL"], !url.isEmpty {
    return (url, nil)
  }
  for script in ["Tools/postgres/cluster.sh", "../../Tools/postgres/cluster.sh"]
  where FileManager.default.fileExists(atPath: script) {
    if let url = cluster(script, "url") { return (url, nil) }
    if let url = cluster(script, "start") { return (url, script) }
  }
  fail(
    "no PostgreSQL server: run `export ORDERLY_POSTGRES_URL=$(bash Tools/postgres/cluster.sh start)` from the repository's folder first"
  )
}

/// What `bash script command` prints, if it succeeds.
///
/// Run with `posix_spawn` and waited for with `waitpid`, its output written to a file: the
/// script's `start` leaves a server running, and a server that kept a pipe of this process open
/// (Foundation's `Process` and `Pipe` let a child inherit one) would leave a read to the pipe's
/// end, and so this run, waiting for ever.
func cluster(_ script: String, _ command: String) -> String? {
  let output = FileManager.default.temporaryDirectory
    .appendingPathComponent("fleet-outbox-\(getpid())-\(command).out").path
  defer { unlink(output) }
  guard
    let status = spawnAndWait(
      "/bin/bash",
      [script, command],
      output: output,
      quiet: command == "url"
    ),
    status == 0, let data = FileManager.default.contents(atPath: output)
  else { return nil }
  let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  return text.isEmpty ? nil : text
}

/// Runs `path` with `arguments`, its standard output in the file `output` (and its standard
/// error thrown away when `quiet`), and waits for it: its exit status, or `nil` if it could not
/// start or did not exit normally.
func spawnAndWait(_ path: String, _ arguments: [String], output: String, quiet: Bool) -> Int32? {
  #if canImport(Darwin)
  var actions: posix_spawn_file_actions_t? = nil
  #else
  var actions = posix_spawn_file_actions_t()
  #endif
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  if quiet { posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) }
  let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
  defer { for argument in argv { free(argument) } }
  var pid: pid_t = 0
  guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { return nil }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) == -1 {
    guard errno == EINTR else { return nil }
  }
  // WIFEXITED and WEXITSTATUS, which Swift does not import (they are macros).
  guard status & 0x7f == 0 else { return nil }
  return (status >> 8) & 0xff
}

/// Starts a worker process and waits until its service runs.
func startWorker(_ name: String, limit: Int, url: String, schema: String) throws -> Process {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
  process.arguments = ["worker", name, "\(limit)", url, schema]
  let output = Pipe()
  process.standardOutput = output
  try process.run()
  var said = Data()
  while !String(decoding: said, as: UTF8.self).contains("ready") {
    let chunk = output.fileHandleForReading.availableData
    if chunk.isEmpty { fail("worker \(name) ended before it started delivering") }
    said.append(chunk)
  }
  return process
}

func count(_ client: PostgresClient, _ query: PostgresQuery) async throws -> Int {
  var value = 0
  for try await found in try await client.query(query, logger: quiet).decode(Int64.self) {
    value = Int(found)
  }
  return value
}

/// Waits, looking every 50 ms, until `condition` holds (or two minutes passed: the run fails).
func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
  let deadline = ContinuousClock.now + .seconds(120)
  while try await !condition() {
    if ContinuousClock.now > deadline { fail("gave up waiting until \(what)") }
    try await Task.sleep(for: .milliseconds(50))
  }
}

/// Waits until `worker` has begun delivering change `number`.
func waitUntilBegun(_ app: PostgresClient, _ worker: String, _ number: Int) async throws {
  try await waitUntil("\(worker) delivers #\(number)") {
    try await count(
      app,
      """
      SELECT count(*)::bigint FROM receiver_log
      WHERE worker = \(worker) AND number = \(number) AND event = 'delivering'
      """
    ) == 1
  }
}

/// One line of the receiver's log, or of the story's own (a kill, a signal).
struct Entry {
  let milliseconds: Double
  let worker: String
  let key: String
  let number: Int
  let fence: Int64
  let event: String
}

func story() async throws {
  let (url, script) = server()
  defer {
    if let script { _ = cluster(script, "stop") }
  }
  let schema = "fleet_outbox_example_\(getpid())"
  let admin = try client(url: url, schema: "public")
  try await admin.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: quiet)
  let app = try client(url: url, schema: schema)
  try await app.query(
    """
    CREATE TABLE receiver_log (seq bigserial PRIMARY KEY,
      at timestamptz NOT NULL DEFAULT clock_timestamp(), worker text, key text, number int,
      fence bigint, event text)
    """,
    logger: quiet
  )
  try await app.query("CREATE TABLE receiver_applied (id uuid PRIMARY KEY)", logger: quiet)
  try await app.query("CREATE TABLE story_cue (name text PRIMARY KEY)", logger: quiet)
  try await fences.createTable(app, logger: quiet)
  let outbox = try await PostgresOutbox<Change>(client: app, logger: quiet)
  say("Three workers share one outbox on PostgreSQL, each running its delivery as a service;")
  say("each holds a key through a 3-second lease. alice (#1-#6), bob (#7-#12) and carol")
  say("(#13-#18) get 6 changes each, a line per key.")
  say()

  // course: the story
  // A delivers two keys at most, so that B, started once A holds two, takes the third.
  let a = try startWorker("A", limit: 2, url: url, schema: schema)
  func append(_ index: Int) async throws {
    let key = keys[index]
    try await outbox.append(
      contentsOf: (1...perKey).map { Change(key: key, number: index * perKey + $0) },
      partition: key
    )
  }
  // One key at a time, so that each run hands the keys out the same way.
  try await append(0)
  try await waitUntilBegun(app, "A", stalled)
  try await append(1)
  try await waitUntilBegun(app, "A", perKey + stalled)
  let b = try startWorker("B", limit: 3, url: url, schema: schema)
  try await append(2)
  try await waitUntilBegun(app, "B", 2 * perKey + stalled)
  say("A takes alice and bob (its limit is two keys) and hangs in #4 and #10.")
  say("B takes carol and is delivering #16.")
  // C takes one key at a time, so the keys A held move to it one after the other, the same way
  // on every run: alice first (her oldest message is older than bob's), then bob.
  let c = try startWorker("C", limit: 1, url: url, schema: schema)
  say("C starts: every key is held, so it waits.")

  kill(a.processIdentifier, SIGKILL)
  try await app.query(
    """
    INSERT INTO receiver_log (worker, key, number, fence, event)
    VALUES ('A', 'alice', 0, 1, 'killed'), ('A', 'bob', 0, 1, 'killed')
    """,
    logger: quiet
  )
  kill(b.processIdentifier, SIGTERM)
  try await app.query("INSERT INTO story_cue (name) VALUES ('B')", logger: quiet)
  try await app.query(
    "INSERT INTO receiver_log (worker, key, number, fence, event) VALUES ('B', 'carol', 0, 1, 'sigterm')",
    logger: quiet
  )
  a.waitUntilExit()
  say("A is killed (SIGKILL) in the middle of #4 and #10; B is sent SIGTERM in the middle of #16.")
  try await waitUntil("every change is delivered") {
    try await outbox.pendingCount() == 0
  }
  b.waitUntilExit()
  kill(c.processIdentifier, SIGTERM)
  c.waitUntilExit()
  say(
    "B "
      + (b.terminationStatus == 0
        ? "finished #16 and exited" : "exited with \(b.terminationStatus)")
      + "; C delivered the rest and stopped on its own SIGTERM."
  )
  // course end: the story
  say()

  var entries: [Entry] = []
  for try await (at, worker, key, number, fence, event) in try await app.query(
    """
    SELECT extract(epoch FROM at)::float8 * 1000, worker, key, number, fence, event
    FROM receiver_log ORDER BY at, seq
    """,
    logger: quiet
  ).decode((Double, String, String, Int, Int64, String).self) {
    entries.append(
      Entry(
        milliseconds: at,
        worker: worker,
        key: key,
        number: number,
        fence: fence,
        event: event
      )
    )
  }
  let delivered = entries.filter { $0.event == "delivered" }
  say("What each key's receiver saw, in order:")
  var allInOrder = true
  for key in keys {
    let numbers = delivered.filter { $0.key == key }.map(\.number)
    let inOrder = numbers == numbers.sorted() && Set(numbers).count == perKey
    allInOrder = allInOrder && inOrder
    var runs: [(worker: String, fence: Int64, numbers: [Int])] = []
    for entry in delivered where entry.key == key {
      if let lastRun = runs.last, lastRun.worker == entry.worker, lastRun.fence == entry.fence {
        runs[runs.count - 1].numbers.append(entry.number)
      } else {
        runs.append((entry.worker, entry.fence, [entry.number]))
      }
    }
    say(
      "  \(key): "
        + runs.map { run in
          run.numbers.map { "#\($0)" }.joined(separator: " ")
            + " by \(run.worker) (fence \(run.fence))"
        }.joined(separator: ", then ")
        + (inOrder ? "" : "  OUT OF ORDER")
    )
  }
  let applied = try await count(app, "SELECT count(*)::bigint FROM receiver_applied")
  let begun = entries.filter { $0.event == "delivering" }.count
  say(
    "\(applied) of \(keys.count * perKey) changes applied, each once (by its id); "
      + "\(begun) deliveries began: the two A was killed in were delivered again, first in "
      + "their keys; the one B was stopped in was not."
  )
  say(allInOrder ? "Every key in order." : "A key was out of order.")

  // When each key moved on: its first delivery by C, after the kill or the signal.
  func moved(_ key: String, after event: String) -> Double? {
    guard let stop = entries.first(where: { $0.key == key && $0.event == event }),
      let taken = entries.first(where: {
        $0.key == key && $0.worker == "C" && $0.event == "delivering"
      })
    else { return nil }
    return taken.milliseconds - stop.milliseconds
  }
  let waits = [("alice", "killed"), ("bob", "killed"), ("carol", "sigterm")].map {
    moved($0.0, after: $0.1) ?? .infinity
  }
  let handedOver = waits[2] < min(waits[0], waits[1])
  say(
    "carol moved to C \(Int(waits[2].rounded())) ms after B's SIGTERM; alice and bob "
      + "\(Int(waits[0].rounded())) ms and \(Int(waits[1].rounded())) ms after A was killed."
  )
  say()

  // The picture, on the database's clock from A's first delivery: who held each key, when.
  say("Hand-over: who held each key, over time (the picture's rows):")
  let origin = entries.first?.milliseconds ?? 0
  // Printed in time order (the database's clock), a key's lines before a later key's at the
  // same instant: A is killed holding alice and bob at once. Nothing else happens in the same
  // few milliseconds by chance (C takes one key at a time), so every run prints the same lines.
  var lines: [(key: Int, milliseconds: Double, text: String)] = []
  for (index, key) in keys.enumerated() {
    let row = "\(index + 1) \(key)"
    let mine = entries.filter { $0.key == key }
    let stopped = mine.contains { $0.event == "sigterm" }
    // A hold begins with a worker's first delivery of the key under a fence.
    var seen = Set<String>()
    for entry in mine where entry.event == "delivering" {
      let holder = "\(entry.worker), fence \(entry.fence)"
      if seen.insert(holder).inserted {
        lines.append((index, entry.milliseconds, "took \(row): \(holder)"))
      }
    }
    if let killed = mine.first(where: { $0.event == "killed" }) {
      lines.append(
        (
          index, killed.milliseconds,
          "killed \(row): A was killed in #\(index * perKey + stalled); the key waits for its lease"
        )
      )
    }
    if stopped, let last = mine.last(where: { $0.worker == "B" && $0.event == "delivered" }) {
      lines.append(
        (
          index, last.milliseconds,
          "released \(row): B finished #\(last.number) after its SIGTERM and let the key go"
        )
      )
    }
    if let end = mine.last(where: { $0.event == "delivered" }) {
      let byC = mine.filter { $0.worker == "C" && $0.event == "delivered" }.map { "#\($0.number)" }
      lines.append(
        (
          index, end.milliseconds,
          "delivered \(row): \(byC.joined(separator: " ")) by C, in order"
        )
      )
    }
  }
  for line in lines.sorted(by: { ($0.milliseconds, $0.key) < ($1.milliseconds, $1.key) }) {
    say("  [\(Int((line.milliseconds - origin).rounded())) ms] \(line.text)")
  }
  say(
    "Verdict: "
      + (allInOrder && handedOver
        ? "the key of the worker stopped with SIGTERM moved at once; the keys of the killed "
          + "worker waited for their leases, and their next holder, with a higher fence, "
          + "delivered the change A was killed in first."
        : allInOrder
          ? "every key in order, but carol did not move before A's leases ran out."
          : "a key was out of order.")
  )
  say()

  // course: the check
  // The audit trail every worker wrote, checked as `orderly outbox audit` checks it.
  guard let trail = try await outbox.auditTrail() else { fail("the workers wrote no audit trail") }
  let report = trail.audit()
  say("The audit of this run's trail (what orderly outbox audit checks):")
  say(
    "  \(report.attempts) attempts over \(report.keys) keys, \(report.delivered) delivered, "
      + "\(report.numbersChecked) numbers checked for loss: "
      + (report.isClean
        ? "nothing lost, out of order, held twice at once, acknowledged twice; fences rising."
        : report.violations.map { "VIOLATION \($0.kind.rawValue): \($0.detail)" }
          .joined(separator: "; "))
  )
  // A was killed, so it writes nothing more. Had it only been paused (SIGSTOP, a frozen
  // machine), it would wake inside its handler for #4 and write under fence 1, after C.
  let late = Envelope(
    id: UUID(),
    sequence: Int64(stalled),
    partition: "alice",
    message: Change(key: "alice", number: stalled),
    attempt: 1,
    appendedAt: Date(),
    fence: 1
  )
  say("A late write: #\(stalled) for alice under A's fence 1, as A's handler would make it had")
  say("A only been paused past its lease:")
  let refused: Bool
  do {
    try await apply(late, by: "A", client: app)
    say("  written: the fence did not refuse it")
    refused = false
  } catch {
    guard let stale = StaleFence.in(error) else { throw error }
    say("  refused: \(stale)")
    refused = true
  }
  // course end: the check

  // The picture of the check: each attempt at alice's changes, as her receiver logged them, in
  // order, and the late write. A row per attempt: #4 has two.
  say()
  say("alice, drawn: each attempt at her changes, and the late write:")
  var attempt = 0
  for entry in entries where entry.key == "alice" {
    let what = "alice #\(entry.number) by \(entry.worker), fence \(entry.fence)"
    switch entry.event {
    case "delivering":
      attempt += 1
      say("  start \(attempt) \(what)")
    case "delivered": say("  finish \(attempt) \(what): delivered")
    case "killed":
      say("  error \(attempt) alice #\(stalled) by A, fence 1: failed, A was killed in it")
    default: continue
    }
  }
  let lateRow = "\(attempt + 1) late write of #\(stalled) by A, fence 1"
  say("  start \(lateRow)")
  say(refused ? "  error \(lateRow): failed, the fence refused it" : "  finish \(lateRow): written")
  say(
    "  (each change delivered in order, #\(stalled) again by C under fence 2; the late write refused)"
  )
  try await admin.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"), logger: quiet)
}

let arguments = CommandLine.arguments
if arguments.count == 6, arguments[1] == "worker", let limit = Int(arguments[3]) {
  try await work(name: arguments[2], limit: limit, url: arguments[4], schema: arguments[5])
}
try await story()
exit(0)
