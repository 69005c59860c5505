// One worker of a PostgreSQL outbox fleet, for OrderlyPostgresTests. Built with the Postgres
// trait only.
//
//   outbox-postgres-probe work URL SCHEMA LIMIT LEASE_MS POLL_MS POLICY
//     Delivers the FleetMessages of the outbox in SCHEMA (POLICY: `stop` or `go` at a dead letter). Each
//     delivery that returns records a row in fleet_delivery (worker, key, n, id, fence, start
//     and end, from this machine's clock), in its own transaction; a message whose `poison`
//     is set throws a permanent failure; one with `holdMs` waits that long first (cancellable).
//     Prints `ready WORKER` once it delivers; on SIGTERM stops gracefully, prints `stopped` and
//     exits 0.
//
//   outbox-postgres-probe fenced URL SCHEMA LEASE_MS GO_FILE
//     The stale worker of the fence test: one slot. Each delivery prints `holding KEY N FENCE`,
//     waits until GO_FILE exists (at most a minute), then, whatever became of its lease, writes
//     the message to fence_ledger in a transaction that first calls PostgresFences.admit, and
//     prints `wrote KEY N FENCE` or `refused KEY N FENCE LAST_FENCE`. SIGTERM as for `work`.
//
//     With ORDERLY_PROBE_RATE_LIMIT=COUNT/MILLISECONDS/PREFIX set, it delivers under that rate
//     limit for the keys starting with PREFIX together (Tools/rate-check). With
//     ORDERLY_PROBE_FAIR_SHARES=PREFIX=WEIGHT,PREFIX=WEIGHT,... set, it delivers with those
//     fair-share groups (Tools/fair-check, FleetFairShareTests).
//
//   outbox-postgres-probe fill URL SCHEMA KEYS PER_KEY PREFIX
//     Appends PER_KEY messages to each of KEYS keys named PREFIX0, PREFIX1, ..., numbered from 1
//     in each key, in transactions of 500; prints `filled N` and exits 0.
//
//   outbox-postgres-probe unique URL SCHEMA KEYS GO_FILE
//     An appender racing others: prints `ready`, waits until GO_FILE exists (at most a minute),
//     then appends one message with the unique key `u-K` for each K in 0..<KEYS, in order,
//     each to key `k-K`, and prints `appended A duplicates D` and exits 0. Delivers nothing.
#if Postgres
import Foundation
import Logging
import OrderlyPostgres
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

/// What the fleet tests append.
struct FleetMessage: Codable, Sendable {
  let key: String
  let n: Int
  var poison = false
  var holdMs = 0
}

/// Writes one line to standard output at once (no buffer that a kill would lose).
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ text: String) -> Never {
  FileHandle.standardError.write(Data(("outbox-postgres-probe: " + text + "\n").utf8))
  exit(2)
}

let arguments = CommandLine.arguments
let fenced = arguments.count == 6 && arguments[1] == "fenced"
let unique = arguments.count == 6 && arguments[1] == "unique" && Int(arguments[4]) != nil
let fill =
  arguments.count == 7 && arguments[1] == "fill" && Int(arguments[4]) != nil
  && Int(arguments[5]) != nil
guard
  fenced || unique || fill
    || (arguments.count == 8 && arguments[1] == "work" && Int(arguments[4]) != nil
      && Int(arguments[5]) != nil && Int(arguments[6]) != nil
      && ["stop", "go"].contains(arguments[7]))
else {
  fail(
    "usage: outbox-postgres-probe work URL SCHEMA LIMIT LEASE_MS POLL_MS stop|go\n"
      + "       outbox-postgres-probe fenced URL SCHEMA LEASE_MS GO_FILE\n"
      + "       outbox-postgres-probe unique URL SCHEMA KEYS GO_FILE\n"
      + "       outbox-postgres-probe fill URL SCHEMA KEYS PER_KEY PREFIX"
  )
}
let limit = fenced ? 1 : Int(arguments[4]) ?? 1
let leaseMs = unique || fill ? 1000 : Int(arguments[fenced ? 4 : 5]) ?? 1000
let pollMs = fenced || unique || fill ? 50 : Int(arguments[6]) ?? 100

var logger = Logger(label: "probe")
logger.logLevel =
  ProcessInfo.processInfo.environment["ORDERLY_PROBE_DEBUG"] == nil ? .warning : .debug
LoggingSystem.bootstrap(StreamLogHandler.standardError)

signal(SIGTERM, SIG_IGN)
let (terminations, termination) = AsyncStream.makeStream(of: Void.self)
let signalSource = DispatchSource.makeSignalSource(signal: SIGTERM)
signalSource.setEventHandler { termination.yield() }
signalSource.resume()

var configuration: PostgresClient.Configuration
do {
  configuration = try PostgresClient.Configuration(orderlyURL: arguments[2])
} catch {
  fail("\(error)")
}
configuration.options.additionalStartupParameters.append(("search_path", arguments[3]))
let client = PostgresClient(configuration: configuration)
let running = Task { await client.run() }

do {
  let outbox = try await PostgresOutbox<FleetMessage>(
    client: client,
    logger: logger,
    partition: { $0.key }
  )
  if fill {
    let (keys, perKey, prefix) = (Int(arguments[4]) ?? 0, Int(arguments[5]) ?? 0, arguments[6])
    var messages: [FleetMessage] = []
    for n in 1...max(1, perKey) where perKey > 0 {
      for key in 0..<keys { messages.append(FleetMessage(key: "\(prefix)\(key)", n: n)) }
    }
    var start = 0
    while start < messages.count {
      let end = min(start + 500, messages.count)
      try await outbox.append(contentsOf: Array(messages[start..<end]))
      start = end
    }
    say("filled \(messages.count)")
    await outbox.close()
    running.cancel()
    exit(0)
  }
  if unique {
    say("ready")
    let (appended, duplicates) = try await appendRacing(
      outbox,
      keys: Int(arguments[4]) ?? 0,
      goFile: arguments[5]
    )
    say("appended \(appended) duplicates \(duplicates)")
    await outbox.close()
    running.cancel()
    exit(0)
  }
  if fenced {
    try startFenced(outbox, goFile: arguments[5])
  } else {
    try startWork(outbox)
  }
  say("ready \(outbox.workerID)")
  for await _ in terminations { break }
  await outbox.stop()
  say("stopped")
  running.cancel()
  exit(0)
} catch {
  fail("\(error)")
}

/// The fleet tests' worker: records each delivery in fleet_delivery.
func startWork(_ outbox: PostgresOutbox<FleetMessage>) throws {
  let policy: DeadLetterPolicy = arguments[7] == "stop" ? .stopLine : .continueLine
  var options = FleetDeliveryOptions(
    limit: limit,
    retry: .standard,
    onDeadLetter: policy,
    lease: .milliseconds(leaseMs),
    pollInterval: .milliseconds(pollMs)
  )
  if let rate = ProcessInfo.processInfo.environment["ORDERLY_PROBE_RATE_LIMIT"] {
    let parts = rate.split(separator: "/", maxSplits: 2).map(String.init)
    guard parts.count == 3, let count = Int(parts[0]), let milliseconds = Int(parts[1]) else {
      fail("ORDERLY_PROBE_RATE_LIMIT is COUNT/MILLISECONDS/PREFIX (got \(rate))")
    }
    options.rateLimits = [
      try RateLimit(count, per: .milliseconds(milliseconds), keys: .prefix(parts[2]))
    ]
  }
  if let shares = ProcessInfo.processInfo.environment["ORDERLY_PROBE_FAIR_SHARES"] {
    let groups = shares.split(separator: ",").map { group in
      let parts = group.split(separator: "=").map(String.init)
      guard parts.count == 2, let weight = Int(parts[1]) else {
        fail("ORDERLY_PROBE_FAIR_SHARES is PREFIX=WEIGHT,... (got \(shares))")
      }
      return FairShares.Group(prefix: parts[0], weight: weight)
    }
    options.fairShares = try FairShares(groups)
  }
  try outbox.start(
    options,
    deliver: .each { envelope in
      let message = envelope.message
      if message.poison { throw PermanentDeliveryFailure("poison \(message.key)#\(message.n)") }
      let started = Date()
      if message.holdMs > 0 { try await Task.sleep(for: .milliseconds(message.holdMs)) }
      try Task.checkCancellation()
      let worker = outbox.workerID
      try await client.query(
        """
        INSERT INTO fleet_delivery (worker, key, n, id, fence, attempt, started_at, ended_at)
        VALUES (\(worker), \(message.key), \(message.n), \(envelope.id), \(envelope.fence ?? 0),
          \(envelope.attempt), \(started), \(Date()))
        """,
        logger: logger
      )
    }
  )
}

/// The fence test's stale worker: holds each delivery until GO_FILE exists, then writes it under
/// its fence, lease or no lease, as a handler that was paused would.
func startFenced(_ outbox: PostgresOutbox<FleetMessage>, goFile: String) throws {
  let fences = try PostgresFences()
  try outbox.start(
    limit: 1,
    lease: .milliseconds(leaseMs),
    pollInterval: .milliseconds(pollMs)
  ) { envelope in
    let message = envelope.message
    let fence = envelope.fence ?? 0
    say("holding \(message.key) \(message.n) \(fence)")
    let deadline = ContinuousClock.now + .seconds(60)
    while !FileManager.default.fileExists(atPath: goFile), ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(20))
    }
    // In a task of its own, so that the cancellation of a delivery whose lease was lost does
    // not keep the write from being tried: the fence must refuse it.
    let write = Task {
      do {
        try await client.withTransaction(logger: logger) { connection in
          try await fences.admit(envelope, on: connection, logger: logger)
          try await connection.query(
            """
            INSERT INTO fence_ledger (key, n, fence, worker)
            VALUES (\(message.key), \(message.n), \(fence), 'stale')
            """,
            logger: logger
          )
        }
        say("wrote \(message.key) \(message.n) \(fence)")
      } catch {
        if let stale = StaleFence.in(error) {
          say("refused \(message.key) \(message.n) \(fence) \(stale.lastFence)")
        } else {
          say("failed \(message.key) \(message.n) \(fence): \(error)")
        }
        throw error
      }
    }
    try await write.value
  }
}
/// The unique-key race: once GO_FILE exists, appends `u-K` for every K, as other processes do.
func appendRacing(
  _ outbox: PostgresOutbox<FleetMessage>,
  keys: Int,
  goFile: String
) async throws -> (appended: Int, duplicates: Int) {
  let deadline = ContinuousClock.now + .seconds(60)
  while !FileManager.default.fileExists(atPath: goFile), ContinuousClock.now < deadline {
    try await Task.sleep(for: .milliseconds(5))
  }
  var counts = (appended: 0, duplicates: 0)
  for key in 0..<keys {
    let result = try await outbox.append(
      FleetMessage(key: "k-\(key)", n: 0),
      uniqueKey: "u-\(key)"
    )
    if result.wasAppended { counts.appended += 1 } else { counts.duplicates += 1 }
  }
  return counts
}
#endif
