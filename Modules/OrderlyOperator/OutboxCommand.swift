package import ArgumentParser
import Foundation
import OrderlyOutbox
import OrderlyOutboxCore

#if Postgres
import Logging
import OrderlyPostgres
#endif

/// `orderly outbox`: what an operator runs against an outbox, SQLite file or PostgreSQL
/// database, while its workers run.
///
/// A module of its own (no product), so that the course's example runs the very command the
/// `orderly` binary runs, in its own process: ``run(_:)``.
package struct OutboxCommand: AsyncParsableCommand {
  package init() {}

  /// Runs `orderly outbox ARGUMENTS` in this process, as the binary would: output on standard
  /// output, a refusal as one `orderly: ...` line given to `errors`.
  ///
  /// - Parameters:
  ///   - arguments: What follows `orderly outbox`.
  ///   - errors: Where a refusal's line goes; standard error by default (an example that shows
  ///     a terminal prints it with the rest).
  /// - Returns: The exit status the binary would end with (0, 1, or 64 for wrong usage).
  package static func run(
    _ arguments: [String],
    errors: @escaping @Sendable (String) -> Void = Self.standardError
  ) async -> Int32 {
    await $errorLine.withValue(errors) {
      do {
        var command = try parseAsRoot(arguments)
        if var command = command as? any AsyncParsableCommand {
          try await command.run()
        } else {
          try command.run()
        }
        return 0
      } catch {
        let message = message(for: error)
        if !message.isEmpty { errors(error is ExitCode ? message : "Error: \(message)") }
        return exitCode(for: error).rawValue
      }
    }
  }

  /// Writes a line to standard error.
  package static let standardError: @Sendable (String) -> Void = { line in
    FileHandle.standardError.write(Data((line + "\n").utf8))
  }

  /// Where the command's refusals go: standard error, unless ``run(_:errors:)`` says otherwise.
  @TaskLocal static var errorLine: @Sendable (String) -> Void = standardError

  package static let configuration = CommandConfiguration(
    commandName: "outbox",
    abstract: "See and fix an outbox: its keys, dead letters and pauses, without SQL.",
    discussion: """
      Name the outbox with --database PATH (an SQLite outbox file) or --url URL (PostgreSQL, \
      postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE; needs the Postgres trait: swift run \
      --traits SQLite,Postgres orderly outbox ...). Every change is one transaction, safe while \
      workers deliver. A file or database that is not an outbox is refused and left as it was. \
      Exit status: 0 done, 1 refused or failed, 64 wrong usage.
      """,
    subcommands: [
      OutboxStatus.self, OutboxKeys.self, OutboxDeadLetters.self, OutboxPeek.self,
      OutboxRetry.self, OutboxDrop.self, OutboxPause.self, OutboxResume.self,
      OutboxSchedulesCommand.self, OutboxGroups.self, OutboxAudit.self, OutboxChaos.self,
      OutboxChaosWorker.self,
    ]
  )
}

// MARK: - Options every subcommand takes

/// Which outbox: an SQLite file or a PostgreSQL URL.
struct OutboxTarget: ParsableArguments {
  @Option(help: ArgumentHelp("The SQLite outbox file.", valueName: "PATH"))
  var database: String?

  @Option(
    help: ArgumentHelp(
      "The PostgreSQL database: postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE.",
      valueName: "URL"
    )
  )
  var url: String?

  func validate() throws {
    switch (database, url) {
    case (nil, nil):
      throw ValidationError(
        "name the outbox: --database PATH (an SQLite file) or --url URL (PostgreSQL)"
      )
    case (.some, .some):
      throw ValidationError("--database and --url cannot be used together; choose one")
    case (.some(let path), nil) where path.isEmpty:
      throw ValidationError("--database needs a path")
    case (nil, .some):
      #if !Postgres
      throw ValidationError(
        "--url needs the Postgres trait: run swift run --traits SQLite,Postgres orderly outbox ..."
      )
      #endif
    default: break
    }
  }

  /// Opens the outbox, refusing anything that is not one already; runs `body`, then closes it.
  func with<T>(_ body: (any DurableOutbox<OperatorMessage>) async throws -> T) async throws -> T {
    let outbox: any DurableOutbox<OperatorMessage>
    if let database {
      outbox = try Outbox<OperatorMessage>(existingAt: database, busyTimeout: .seconds(10))
    } else {
      #if Postgres
      var logger = Logger(label: "orderly.outbox.cli")
      logger.logLevel = .critical
      outbox = try await PostgresOutbox<OperatorMessage>(
        url: url ?? "",
        logger: logger,
        creatingTables: false
      )
      #else
      throw OperatorFailure(message: "--url needs the Postgres trait")
      #endif
    }
    do {
      let result = try await body(outbox)
      try? await outbox.close()
      return result
    } catch {
      try? await outbox.close()
      throw error
    }
  }

  /// What the report names the outbox by.
  var shown: (store: String, name: String) {
    if let database { return ("sqlite", database) }
    return ("postgresql", url.map(OperatorReport.withoutPassword) ?? "")
  }
}

/// How a read command prints.
enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
  case text, json
}

/// The dead-letter policy the deliverers run with, which decides whether a dead letter blocks
/// its key (the store does not keep it).
enum PolicyOption: String, ExpressibleByArgument, CaseIterable {
  case stopLine = "stop-line"
  case goOn = "go-on"

  var policy: DeadLetterPolicy { self == .stopLine ? .stopLine : .continueLine }
}

/// The options of a command that reads.
struct ReadOptions: ParsableArguments {
  @Option(help: "text (aligned for a terminal) or json (stable; see the outbox's DocC article).")
  var format: OutputFormat = .text
}

/// The options of a command that judges which keys are stuck.
struct PolicyOptions: ParsableArguments {
  @Option(
    name: .customLong("dead-letters"),
    help: ArgumentHelp(
      "What a dead letter does to its key in your deliverers: stop-line (the default of start) or go-on.",
      valueName: "POLICY"
    )
  )
  var deadLetters: PolicyOption = .stopLine
}

/// A message identifier typed on the command line.
struct MessageID: ExpressibleByArgument {
  let uuid: UUID

  init?(argument: String) {
    guard let uuid = UUID(uuidString: argument.trimmingCharacters(in: .whitespaces)) else {
      return nil
    }
    self.uuid = uuid
  }

  static var defaultCompletionKind: CompletionKind { .default }
}

/// A key typed on the command line: `(default)` is the default line.
struct KeyArgument: ExpressibleByArgument {
  let partition: String?

  init?(argument: String) {
    guard !argument.isEmpty else { return nil }
    partition = argument == OperatorReport.defaultLine ? nil : argument
  }
}

/// A refusal of the command's own (an unknown key, a message that is not a dead letter): one
/// line, then exit status 1.
struct OperatorFailure: Error {
  let message: String
}

/// Runs a subcommand's body, turning an outbox's refusal into one line and exit status 1.
func operate(_ body: () async throws -> Void) async throws {
  do {
    try await body()
  } catch let error as OutboxError {
    throw failure(error.description)
  } catch let error as OperatorFailure {
    throw failure(error.message)
  }
}

private func failure(_ message: String) -> ExitCode {
  OutboxCommand.errorLine("orderly: \(message)")
  return ExitCode.failure
}

// MARK: - Reading

struct OutboxStatus: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "status",
    abstract:
      "Pending, in flight, dead letters, paused and blocked keys, the oldest pending message."
  )

  @OptionGroup var target: OutboxTarget
  @OptionGroup var read: ReadOptions
  @OptionGroup var policy: PolicyOptions
  @Flag(name: .customLong("per-key"), help: "Add a row for every key (as `keys` prints them).")
  var perKey = false

  func run() async throws {
    try await operate {
      let report = try await target.with { outbox in
        let counts = try await outbox.counts()
        let keys = try await outbox.keys()
        let schedules = try await outbox.schedules.list()
        return OperatorReport.Status(
          target: target.shown,
          counts: counts,
          keys: keys,
          policy: policy.deadLetters.policy,
          perKey: perKey,
          schedules: schedules,
          now: Date()
        )
      }
      print(read.format == .json ? OperatorReport.json(report) : report.text)
    }
  }
}

struct OutboxKeys: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "keys",
    abstract: "Every key with messages, dead letters or a pause; the stuck ones first, with why."
  )

  @OptionGroup var target: OutboxTarget
  @OptionGroup var read: ReadOptions
  @OptionGroup var policy: PolicyOptions
  @Flag(help: "Only the stuck keys.")
  var stuck = false

  func run() async throws {
    try await operate {
      let now = Date()
      let keys = try await target.with { outbox in try await outbox.keys() }
      var rows = keys.sortedForOperator(onDeadLetter: policy.deadLetters.policy, at: now)
        .map { OperatorReport.KeyRow($0, policy: policy.deadLetters.policy, now: now) }
      if stuck { rows = rows.filter { !$0.stuck.isEmpty } }
      print(read.format == .json ? OperatorReport.json(rows) : OperatorReport.text(rows, now: now))
    }
  }
}

struct OutboxDeadLetters: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "dead-letters",
    abstract: "Every dead letter: id, key, attempts, last error, when it failed."
  )

  @OptionGroup var target: OutboxTarget
  @OptionGroup var read: ReadOptions

  func run() async throws {
    try await operate {
      let letters = try await target.with { outbox in try await outbox.deadLetters() }
      let rows = letters.map(OperatorReport.DeadLetterRow.init)
      print(read.format == .json ? OperatorReport.json(rows) : OperatorReport.text(rows))
    }
  }
}

struct OutboxPeek: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "peek",
    abstract: "One stored message, pending or dead, as JSON."
  )

  @OptionGroup var target: OutboxTarget
  @Option(help: "json (the default: the stored message) or text (its fields, then the message).")
  var format: OutputFormat = .json
  @Argument(help: ArgumentHelp("The message's id.", valueName: "ID"))
  var id: MessageID

  func run() async throws {
    try await operate {
      let stored = try await target.with { outbox in try await outbox.storedMessage(id: id.uuid) }
      guard let stored else {
        throw OperatorFailure(message: OperatorReport.noSuchMessage(id.uuid))
      }
      let peek = OperatorReport.Peek(stored)
      print(format == .json ? OperatorReport.json(peek) : peek.text)
    }
  }
}

// MARK: - Changing

struct OutboxRetry: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "retry",
    abstract: "Put a dead letter back at its place, at the head of its key, to be delivered again."
  )

  @OptionGroup var target: OutboxTarget
  @Argument(help: ArgumentHelp("The dead letter's id.", valueName: "ID"))
  var id: MessageID

  func run() async throws {
    try await operate {
      let key = try await target.with { outbox in
        try await settle(outbox, id: id.uuid, verb: "retried") {
          try await $0.retryDeadLetter(id: $1)
        }
      }
      print("retried \(id.uuid.uuidString): it is next in key \(OperatorReport.shown(key))")
    }
  }
}

struct OutboxDrop: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "drop",
    abstract: "Remove a dead letter for good; its key goes on with the message after it."
  )

  @OptionGroup var target: OutboxTarget
  @Argument(help: ArgumentHelp("The dead letter's id.", valueName: "ID"))
  var id: MessageID

  func run() async throws {
    try await operate {
      let key = try await target.with { outbox in
        try await settle(outbox, id: id.uuid, verb: "dropped") {
          try await $0.dropDeadLetter(id: $1)
        }
      }
      print("dropped \(id.uuid.uuidString) from key \(OperatorReport.shown(key))")
    }
  }
}

/// Retries or drops a dead letter, after checking it is one; returns its key.
private func settle(
  _ outbox: any DurableOutbox<OperatorMessage>,
  id: UUID,
  verb: String,
  _ change: (any DurableOutbox<OperatorMessage>, UUID) async throws -> Void
) async throws -> String? {
  guard let stored = try await outbox.storedMessage(id: id) else {
    throw OperatorFailure(message: OperatorReport.noSuchMessage(id))
  }
  guard stored.deadLetter != nil else {
    throw OperatorFailure(
      message:
        "message \(id.uuidString) is pending in key \(OperatorReport.shown(stored.partition)) "
        + "(\(stored.attempts) failed attempt(s)), not a dead letter: only a dead letter can be "
        + "\(verb); see `orderly outbox dead-letters`"
    )
  }
  do {
    try await change(outbox, id)
  } catch OutboxError.noSuchDeadLetter {
    // Another operator (or a worker) settled it in between.
    throw OperatorFailure(
      message: "dead letter \(id.uuidString) was settled by someone else just now; nothing changed"
    )
  }
  return stored.partition
}

struct OutboxPause: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pause",
    abstract: "Stop delivering one key, in every worker, until `resume`; appends go on."
  )

  @OptionGroup var target: OutboxTarget
  @Argument(help: ArgumentHelp("The key; (default) for the default line.", valueName: "KEY"))
  var key: KeyArgument

  func run() async throws {
    try await operate {
      try await target.with { outbox in
        let known = try await outbox.keys().first { $0.partition == key.partition }
        guard let known else {
          throw OperatorFailure(message: OperatorReport.noSuchKey(key.partition))
        }
        if known.paused {
          throw OperatorFailure(
            message: "key \(OperatorReport.shown(key.partition)) is already paused; nothing changed"
          )
        }
        try await outbox.pause(partition: key.partition)
      }
      print(
        "paused key \(OperatorReport.shown(key.partition)): its delivery under way finishes, "
          + "no worker takes its next message until `orderly outbox resume`"
      )
    }
  }
}

struct OutboxResume: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "resume",
    abstract: "Deliver a paused key again, from its oldest message."
  )

  @OptionGroup var target: OutboxTarget
  @Argument(help: ArgumentHelp("The key; (default) for the default line.", valueName: "KEY"))
  var key: KeyArgument

  func run() async throws {
    try await operate {
      try await target.with { outbox in
        let paused = try await outbox.pausedPartitions()
        guard paused.contains(key.partition) else {
          let known = try await outbox.keys().contains { $0.partition == key.partition }
          throw OperatorFailure(
            message: known
              ? "key \(OperatorReport.shown(key.partition)) is not paused; nothing changed"
              : OperatorReport.noSuchKey(key.partition)
          )
        }
        try await outbox.resume(partition: key.partition)
      }
      print("resumed key \(OperatorReport.shown(key.partition))")
    }
  }
}
