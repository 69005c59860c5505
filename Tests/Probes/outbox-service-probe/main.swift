// A server process in miniature, for OrderlyServerTests: an outbox delivered by an
// OutboxService in a ServiceGroup that stops on SIGTERM, or an app process that appends under a
// trace. Built with the Server trait only.
//
//   outbox-service-probe serve PATH GATE GRACE_MS
//     Delivers PATH's messages (strings). Prints `begin TEXT ATTEMPT` when a delivery begins and
//     `end TEXT` when it returns; a message named `slow` waits until the file GATE exists
//     (printing `cancelled slow` if it is cancelled first). SIGTERM starts a graceful shutdown
//     with GRACE_MS milliseconds of grace; prints `exited` once the group has returned and the
//     outbox is closed.
//   outbox-service-probe pgserve URL SCHEMA GATE GRACE_MS LEASE_MS POLL_MS
//     The same, as one worker of a PostgreSQL outbox fleet (the outbox's tables in SCHEMA; the
//     Postgres trait): prints `begin TEXT ATTEMPT FENCE` and `end TEXT`; a message whose text
//     starts with `slow` waits for GATE.
//   outbox-service-probe append-traced PATH TEXT
//     Appends TEXT inside a span of an in-memory tracer, with its trace context, and prints
//     `trace TRACE_ID SPAN_ID`.
#if Server
import Foundation
import InMemoryTracing
import Logging
import OrderlyServer
#if SQLite
import OrderlyOutbox
#endif
#if Postgres
import OrderlyPostgres
import PostgresNIO
#endif
import ServiceLifecycle
import UnixSignals
import Tracing

/// Writes one line to standard output at once (no buffer that a kill would lose).
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// Logs go to standard error; standard output is the test's record of deliveries.
LoggingSystem.bootstrap(StreamLogHandler.standardError)

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("outbox-service-probe: \(message)\n".utf8))
  exit(2)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "serve":
  #if SQLite
  guard arguments.count == 4, let grace = Int(arguments[3]) else {
    fail("usage: serve PATH GATE GRACE_MS")
  }
  let (path, gate) = (arguments[1], arguments[2])
  let outbox: Outbox<String>
  do {
    outbox = try Outbox<String>(path: path)
  } catch {
    fail("cannot open \(path): \(error)")
  }
  var logger = Logger(label: "outbox-service-probe")
  logger.logLevel = .info
  let service = OutboxService(
    outbox: outbox,
    shutdownGracePeriod: .milliseconds(grace),
    logger: logger
  ) { envelope in
    say("begin \(envelope.message) \(envelope.attempt)")
    if envelope.message == "slow" {
      do {
        // A receiver that answers when the test says so: polls for the gate file.
        while !FileManager.default.fileExists(atPath: gate) {
          try await Task.sleep(for: .milliseconds(5))
        }
      } catch {
        say("cancelled \(envelope.message)")
        throw error
      }
    }
    say("end \(envelope.message)")
  }
  let group = ServiceGroup(
    services: [service],
    gracefulShutdownSignals: [.sigterm],
    logger: logger
  )
  do {
    try await group.run()
    try await outbox.close()
  } catch {
    fail("\(error)")
  }
  say("exited")
  #else
  fail("serve needs the SQLite trait")
  #endif

case "pgserve":
  #if Postgres
  guard arguments.count == 7, let grace = Int(arguments[4]), let lease = Int(arguments[5]),
    let poll = Int(arguments[6])
  else {
    fail("usage: pgserve URL SCHEMA GATE GRACE_MS LEASE_MS POLL_MS")
  }
  let gate = arguments[3]
  var logger = Logger(label: "outbox-service-probe")
  logger.logLevel = .info
  let client: PostgresClient
  do {
    var configuration = try PostgresClient.Configuration(orderlyURL: arguments[1])
    configuration.options.additionalStartupParameters.append(("search_path", arguments[2]))
    client = PostgresClient(configuration: configuration, backgroundLogger: logger)
  } catch {
    fail("bad URL: \(error)")
  }
  let running = Task { await client.run() }
  let outbox: PostgresOutbox<String>
  do {
    outbox = try await PostgresOutbox<String>(client: client, logger: logger)
  } catch {
    fail("cannot open the outbox: \(error)")
  }
  let service = OutboxService(
    outbox: outbox,
    name: "fleet",
    limit: 16,
    lease: .milliseconds(lease),
    pollInterval: .milliseconds(poll),
    shutdownGracePeriod: .milliseconds(grace),
    logger: logger
  ) { envelope in
    say("begin \(envelope.message) \(envelope.attempt) \(envelope.fence ?? 0)")
    if envelope.message.hasPrefix("slow") {
      do {
        while !FileManager.default.fileExists(atPath: gate) {
          try await Task.sleep(for: .milliseconds(5))
        }
      } catch {
        say("cancelled \(envelope.message)")
        throw error
      }
    }
    say("end \(envelope.message)")
  }
  let group = ServiceGroup(
    services: [service],
    gracefulShutdownSignals: [.sigterm],
    logger: logger
  )
  do {
    try await group.run()
    await outbox.close()
  } catch {
    fail("\(error)")
  }
  running.cancel()
  say("exited")
  #else
  fail("pgserve needs the Postgres trait")
  #endif

case "append-traced":
  #if SQLite
  guard arguments.count == 3 else { fail("usage: append-traced PATH TEXT") }
  // Identifiers of this process's own, so that the test can tell them from its tracer's.
  let pid = ProcessInfo.processInfo.processIdentifier
  let tracer = InMemoryTracer(
    idGenerator: .init(
      nextTraceID: { "appender-\(pid)-trace" },
      nextSpanID: { "appender-\(pid)-span" }
    )
  )
  do {
    let outbox = try Outbox<String>(path: arguments[1])
    let span = tracer.startSpan("request", context: .topLevel, ofKind: .server)
    try await ServiceContext.withValue(span.context) {
      _ = try await outbox.appendTraced(arguments[2], instrument: tracer)
    }
    span.end()
    try await outbox.close()
    let context = span.context.inMemorySpanContext
    say("trace \(context?.traceID ?? "-") \(context?.spanID ?? "-")")
  } catch {
    fail("\(error)")
  }
  #else
  fail("append-traced needs the SQLite trait")
  #endif

default:
  fail(
    "usage: serve PATH GATE GRACE_MS | pgserve URL SCHEMA GATE GRACE_MS LEASE_MS POLL_MS | append-traced PATH TEXT"
  )
}
#else
import Foundation

FileHandle.standardError.write(Data("outbox-service-probe needs the Server trait\n".utf8))
exit(2)
#endif
