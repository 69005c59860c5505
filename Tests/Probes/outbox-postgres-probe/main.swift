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
guard arguments.count == 8, arguments[1] == "work", let limit = Int(arguments[4]),
  let leaseMs = Int(arguments[5]), let pollMs = Int(arguments[6]),
  ["stop", "go"].contains(arguments[7])
else {
  fail("usage: outbox-postgres-probe work URL SCHEMA LIMIT LEASE_MS POLL_MS stop|go")
}

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
configuration.options.additionalStartupParameters = [("search_path", arguments[3])]
let client = PostgresClient(configuration: configuration)
let running = Task { await client.run() }

do {
  let outbox = try await PostgresOutbox<FleetMessage>(
    client: client,
    logger: logger,
    partition: { $0.key }
  )
  let policy: DeadLetterPolicy = arguments[7] == "stop" ? .stopLine : .continueLine
  try outbox.start(
    limit: limit,
    retry: .standard,
    onDeadLetter: policy,
    lease: .milliseconds(leaseMs),
    pollInterval: .milliseconds(pollMs)
  ) { envelope in
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
  say("ready \(outbox.workerID)")
  for await _ in terminations { break }
  await outbox.stop()
  say("stopped")
  running.cancel()
  exit(0)
} catch {
  fail("\(error)")
}
#endif
