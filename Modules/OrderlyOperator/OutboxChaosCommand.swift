import ArgumentParser
import Foundation
import OrderlyOutboxCore

#if Postgres
import Logging
import OrderlyPostgres
import PostgresNIO
#endif

/// `orderly outbox chaos`: a fleet of worker processes against a fresh schema on the user's
/// server, killed and cut off at random while messages are appended, then drained and audited.
struct OutboxChaos: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "chaos",
    abstract:
      "Run worker processes against a fresh schema on your server, kill them and cut their connections at random, then audit.",
    discussion: """
      Creates a schema of its own (orderly_chaos_...) on the server at --url, starts --workers \
      worker processes (this binary, with the audit trail on), appends --messages messages over \
      --keys keys during --duration seconds while killing a worker (SIGKILL, then starting \
      another) or ending its connections (pg_terminate_backend) at random, then waits until \
      every message is delivered and runs the audit (orderly outbox audit). Prints a table: \
      delivered, lost, order violations, overlaps, repeats and why, and how long keys waited \
      for a new holder against the lease. Exit status 1 on any violation, a lost message, or an \
      outbox that did not drain. The schema is dropped at the end unless --keep is given. Needs \
      the Postgres trait, and a user allowed to create a schema. It does not restart the server.
      """
  )

  @Option(
    help: ArgumentHelp(
      "The PostgreSQL server: postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE.",
      valueName: "URL"
    )
  )
  var url: String

  @Option(help: "How many worker processes (1 to 32).")
  var workers = 4

  @Option(help: "How many keys the messages are spread over.")
  var keys = 200

  @Option(help: "How many messages to append.")
  var messages = 5_000

  @Option(help: ArgumentHelp("How long to append and do harm, in seconds.", valueName: "SECONDS"))
  var duration = 30.0

  @Option(help: ArgumentHelp("The workers' lease, in seconds (0.4 or more).", valueName: "SECONDS"))
  var lease = 2.0

  @Option(help: "Up to how many messages of a key one delivery gets (1: one at a time).")
  var batch = 1

  @Option(help: "Seed of the random harm, to repeat a run.")
  var seed: UInt64?

  @Flag(help: "Keep the schema (to look at it, or run orderly outbox audit on it).")
  var keep = false

  func validate() throws {
    guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
      throw ValidationError(
        "--url must be a PostgreSQL URL: postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
      )
    }
    guard (1...32).contains(workers) else {
      throw ValidationError("--workers must be from 1 to 32 (got \(workers))")
    }
    guard keys >= 1 else { throw ValidationError("--keys must be 1 or more (got \(keys))") }
    guard messages >= 1 else {
      throw ValidationError("--messages must be 1 or more (got \(messages))")
    }
    guard duration.isFinite, duration >= 1, duration <= 3_600 else {
      throw ValidationError("--duration must be from 1 to 3600 seconds (got \(duration))")
    }
    guard lease.isFinite, lease >= 0.4, lease <= 600 else {
      throw ValidationError("--lease must be from 0.4 to 600 seconds (got \(lease))")
    }
    guard (1...1_000).contains(batch) else {
      throw ValidationError("--batch must be from 1 to 1000 (got \(batch))")
    }
    #if !Postgres
    throw ValidationError(
      "chaos needs the Postgres trait: run swift run --traits SQLite,Postgres orderly outbox chaos ..."
    )
    #endif
  }

  func run() async throws {
    #if Postgres
    try await operate {
      let settings = ChaosSettings(
        url: url,
        workers: workers,
        keys: keys,
        messages: messages,
        duration: duration,
        lease: lease,
        batch: batch,
        seed: seed ?? UInt64.random(in: 1...UInt64.max),
        keep: keep
      )
      let outcome = try await ChaosRun(settings).run()
      print(outcome.table)
      if !outcome.isClean { throw ExitCode.failure }
    }
    #endif
  }
}

/// `orderly outbox chaos-worker`: one worker of `orderly outbox chaos`; not for people.
struct OutboxChaosWorker: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "chaos-worker",
    abstract: "One worker process of orderly outbox chaos.",
    shouldDisplay: false
  )

  @Option var url: String
  @Option var lease: Double
  @Option var batch: Int

  func run() async throws {
    #if Postgres
    try await operate {
      try await ChaosWorker.run(url: url, lease: lease, batch: batch)
    }
    #else
    throw ValidationError("chaos-worker needs the Postgres trait")
    #endif
  }
}
