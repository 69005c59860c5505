// Order across processes: three worker processes share one outbox on PostgreSQL. Worker A
// takes every key and is killed with SIGKILL in the middle of a delivery; B and C take the keys
// over once A's leases run out, deliver A's unfinished message again first, and every key
// stays in order.
//
//   swift run --package-path Examples/fleet-outbox fleet-outbox
//
// It uses the server ORDERLY_POSTGRES_URL names, or the throwaway one Tools/postgres/cluster.sh
// runs, or starts one with that script (and stops it at the end). `fleet-outbox worker NAME URL SCHEMA`
// is one worker: the story starts three.
import Foundation
import Logging
import OrderlyPostgres
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

/// A change to one customer's account: `number` counts messages across every key (#1-#6 are
/// alice's, #7-#12 bob's, #13-#18 carol's), so each has a row of its own in the picture.
struct Change: Codable, Sendable {
  let key: String
  let number: Int
}

let keys = ["alice", "bob", "carol"]
let perKey = 6
/// The message each key's first worker is killed in the middle of.
let stalled = 4
let lease = Duration.seconds(2)

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

// MARK: - One worker

/// Delivers until SIGTERM.
///
/// Its receiver records each delivery as it begins and ends, and
/// applies each message once, by its id. Worker A never finishes a key's message #4.
func work(name: String, url: String, schema: String) async throws -> Never {
  signal(SIGTERM, SIG_IGN)
  let (stops, stop) = AsyncStream.makeStream(of: Void.self)
  let source = DispatchSource.makeSignalSource(signal: SIGTERM)
  source.setEventHandler { stop.yield() }
  source.resume()
  let client = try client(url: url, schema: schema)
  let outbox = try await PostgresOutbox<Change>(client: client, logger: quiet)
  try outbox.start(limit: 3, lease: lease, pollInterval: .milliseconds(100)) { envelope in
    let change = envelope.message
    let fence = envelope.fence ?? 0
    try await client.query(
      """
      INSERT INTO receiver_log (worker, key, number, attempt, fence, event)
      VALUES (\(name), \(change.key), \(change.number), \(envelope.attempt), \(fence), 'delivering')
      """,
      logger: quiet
    )
    if name == "A" && (change.number - 1) % perKey + 1 == stalled {
      // Killed here: this delivery never ends.
      try await Task.sleep(for: .seconds(3_600))
    }
    try await client.withTransaction(logger: quiet) { connection in
      try await connection.query(
        "INSERT INTO receiver_applied (id) VALUES (\(envelope.id)) ON CONFLICT DO NOTHING",
        logger: quiet
      )
      try await connection.query(
        """
        INSERT INTO receiver_log (worker, key, number, attempt, fence, event)
        VALUES (\(name), \(change.key), \(change.number), \(envelope.attempt), \(fence), 'delivered')
        """,
        logger: quiet
      )
    }
  }
  say("ready")
  for await _ in stops { break }
  await outbox.stop()
  exit(0)
}

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
func cluster(_ script: String, _ command: String) -> String? {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/bin/bash")
  process.arguments = [script, command]
  let output = Pipe()
  process.standardOutput = output
  // `url` fails quietly when no cluster runs; `start` says why it could not start one.
  if command == "url" { process.standardError = FileHandle.nullDevice }
  guard (try? process.run()) != nil else { return nil }
  let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    .trimmingCharacters(in: .whitespacesAndNewlines)
  process.waitUntilExit()
  return process.terminationStatus == 0 && !text.isEmpty ? text : nil
}

/// Starts a worker process and waits until it delivers.
func startWorker(_ name: String, url: String, schema: String) throws -> Process {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
  process.arguments = ["worker", name, url, schema]
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

/// Waits, looking every 50 ms, until `condition` holds (or a minute passed: the run fails).
func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
  let deadline = ContinuousClock.now + .seconds(60)
  while try await !condition() {
    if ContinuousClock.now > deadline { fail("gave up waiting until \(what)") }
    try await Task.sleep(for: .milliseconds(50))
  }
}

func story() async throws {
  let (url, script) = server()
  defer {
    if let script {
      let stop = Process()
      stop.executableURL = URL(fileURLWithPath: "/bin/bash")
      stop.arguments = [script, "stop"]
      try? stop.run()
      stop.waitUntilExit()
    }
  }
  let schema = "fleet_outbox_example_\(getpid())"
  let admin = try client(url: url, schema: "public")
  try await admin.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: quiet)
  let app = try client(url: url, schema: schema)
  try await app.query(
    """
    CREATE TABLE receiver_log (seq bigserial PRIMARY KEY, worker text, key text, number int,
      attempt int, fence bigint, event text)
    """,
    logger: quiet
  )
  try await app.query("CREATE TABLE receiver_applied (id uuid PRIMARY KEY)", logger: quiet)
  let outbox = try await PostgresOutbox<Change>(client: app, logger: quiet)
  say("Three workers share one outbox on PostgreSQL; each holds a key through a 2-second lease.")
  say("alice (#1-#6), bob (#7-#12) and carol (#13-#18) get 6 changes each, a line per key.")
  say()

  let a = try startWorker("A", url: url, schema: schema)
  // One key at a time, so that A takes them in this order on every run.
  for (index, key) in keys.enumerated() {
    let changes = (1...perKey).map { Change(key: key, number: index * perKey + $0) }
    try await outbox.append(contentsOf: changes, partition: key)
    let stuck = index * perKey + stalled
    try await waitUntil("A delivers #\(stuck)") {
      try await count(
        app,
        "SELECT count(*)::bigint FROM receiver_log WHERE worker = 'A' AND number = \(stuck)"
      ) == 1
    }
  }
  say("A starts alone and takes every key as its changes are appended.")
  kill(a.processIdentifier, SIGKILL)
  a.waitUntilExit()
  say("A is killed (SIGKILL) in the middle of delivering #4, #10 and #16.")
  let b = try startWorker("B", url: url, schema: schema)
  let c = try startWorker("C", url: url, schema: schema)
  say("B and C start. No key moves until A's lease on it runs out; then one of them takes it.")
  try await waitUntil("every change is delivered") {
    try await outbox.pendingCount() == 0
  }
  for worker in [b, c] {
    kill(worker.processIdentifier, SIGTERM)
    worker.waitUntilExit()
  }
  say()

  struct Entry {
    let worker: String
    let key: String
    let number: Int
    let attempt: Int
    let fence: Int64
    let event: String
  }
  var entries: [Entry] = []
  for try await (worker, key, number, attempt, fence, event) in try await app.query(
    "SELECT worker, key, number, attempt, fence, event FROM receiver_log ORDER BY seq",
    logger: quiet
  ).decode((String, String, Int, Int, Int64, String).self) {
    entries.append(
      Entry(worker: worker, key: key, number: number, attempt: attempt, fence: fence, event: event)
    )
  }
  say("What each key's receiver saw, in order:")
  var allInOrder = true
  for key in keys {
    let delivered = entries.filter { $0.key == key && $0.event == "delivered" }
    let numbers = delivered.map(\.number)
    let inOrder = numbers == numbers.sorted() && Set(numbers).count == perKey
    allInOrder = allInOrder && inOrder
    let before = delivered.filter { $0.worker == "A" }.map { "#\($0.number)" }
    let after = delivered.filter { $0.worker != "A" }
    let fences = Set(after.map(\.fence)).sorted().map(String.init).joined(separator: ", ")
    say(
      "  \(key): \(before.joined(separator: " ")) by A (fence 1), then "
        + after.map { "#\($0.number)" }.joined(separator: " ")
        + " by the worker that took it over (fence \(fences))"
        + (inOrder ? "" : "  OUT OF ORDER")
    )
  }
  let applied = try await count(app, "SELECT count(*)::bigint FROM receiver_applied")
  let begun = entries.filter { $0.event == "delivering" }.count
  say(
    "\(applied) of \(keys.count * perKey) changes applied, each once (by its id); "
      + "\(begun) deliveries began: the three A was killed in were delivered again, first in "
      + "their keys."
  )
  say(allInOrder ? "Every key in order." : "A key was out of order.")
  // Who took which key changes from run to run; how many each took is printed as numbers, so
  // the course's recorded run stays comparable.
  let takers = Dictionary(grouping: keys) { key in
    entries.first { $0.key == key && $0.worker != "A" }?.worker ?? "nobody"
  }
  say(
    "Keys taken over: "
      + ["B", "C"].map { "\($0) \(takers[$0]?.count ?? 0)" }.joined(separator: ", ")
      + " (of \(keys.count))."
  )
  say()
  // The picture: one row per key, in the story's three steps (within a step, keys in the order
  // A took them). A took the keys one after the other, was killed holding all three, and the
  // next holders took each key only after A's lease on it ran out.
  say("Hand-over, key by key (the picture's rows):")
  func numbers(_ key: String, _ worker: (String) -> Bool, _ event: String) -> String {
    entries.filter { $0.key == key && worker($0.worker) && $0.event == event }
      .map { "#\($0.number)" }.joined(separator: " ")
  }
  for (row, key) in keys.enumerated() {
    say(
      "  delivering \(row + 1) \(key): A takes the key (fence 1), delivers "
        + numbers(key, { $0 == "A" }, "delivered") + ", then begins #\(row * perKey + stalled)"
    )
  }
  for (row, key) in keys.enumerated() {
    say(
      "  retrying \(row + 1) \(key) in 2 seconds: A was killed in #\(row * perKey + stalled); "
        + "the key waits until A's lease runs out"
    )
  }
  for (row, key) in keys.enumerated() {
    let fences = Set(entries.filter { $0.key == key && $0.worker != "A" }.map(\.fence))
    say(
      "  delivering \(row + 1) \(key): the next holder takes the key (fence "
        + fences.sorted().map(String.init).joined(separator: ", ") + ") and begins "
        + "#\(row * perKey + stalled) again"
    )
  }
  for (row, key) in keys.enumerated() {
    say(
      "  delivered \(row + 1) \(key): "
        + numbers(key, { $0 != "A" }, "delivered") + ", in order, each once"
    )
  }
  say(
    "Verdict: "
      + (allInOrder
        ? "A held every key when it was killed; each key waited for A's lease to run out, and "
          + "its next holder delivered the change A was killed in first, then the rest, in order."
        : "a key was out of order.")
  )
  try await admin.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"), logger: quiet)
}

let arguments = CommandLine.arguments
if arguments.count == 5, arguments[1] == "worker" {
  try await work(name: arguments[2], url: arguments[3], schema: arguments[4])
}
try await story()
exit(0)
