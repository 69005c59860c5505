// `orderly outbox chaos`: the run itself (workers, harm, drain, audit). Postgres trait only.
#if Postgres
import Foundation
import Logging
import OrderlyOutboxCore
import OrderlyPostgres
import PostgresNIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the chaos run appends: key and its number within the key.
struct ChaosMessage: Codable, Sendable {
  let key: String
  let n: Int
}

/// The options of one run.
struct ChaosSettings: Sendable {
  let url: String
  let workers: Int
  let keys: Int
  let messages: Int
  let duration: Double
  let lease: Double
  let batch: Int
  let seed: UInt64
  let keep: Bool
}

/// A failure of the run itself (not a finding): one line, exit status 1.
private func chaosFailure(_ text: String) -> OperatorFailure {
  OperatorFailure(message: "chaos: " + text)
}

/// Waits for `operation` at most `seconds`; throws a failure naming `what` after that.
@discardableResult
private func within<T: Sendable>(
  _ seconds: Double,
  _ what: String,
  _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
  try await withThrowingTaskGroup(of: T?.self) { group in
    group.addTask { try await operation() }
    group.addTask {
      // The deadline itself: a sleep on the real clock, ended by `cancelAll` once the
      // operation is done.
      try await Task.sleep(for: .seconds(seconds))
      return nil
    }
    defer { group.cancelAll() }
    guard let first = try await group.next(), let value = first else {
      throw chaosFailure("\(what) did not end within \(Int(seconds)) s")
    }
    return value
  }
}

/// A small random generator with a seed, so that a run's harm can be repeated (SplitMix64).
struct ChaosRandom: RandomNumberGenerator {
  private var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// One worker process and the lines it printed.
final class ChaosProcess {
  let process: Process
  private let lines: AsyncStream<String>

  init(executable: URL, arguments: [String]) throws {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let (lines, continuation) = AsyncStream.makeStream(of: String.self)
    let reading = output.fileHandleForReading
    try process.run()
    // The pipe is read on a thread of its own until the process ends (end of file).
    Thread.detachNewThread {
      var buffer = Data()
      while true {
        let chunk = reading.availableData
        if chunk.isEmpty { break }
        buffer.append(chunk)
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
          continuation.yield(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
          buffer.removeSubrange(buffer.startIndex...newline)
        }
      }
      continuation.finish()
    }
    self.process = process
    self.lines = lines
  }

  /// Waits for the worker's `ready` line, at most a minute.
  func ready() async throws {
    let lines = lines
    let seen = try await within(60, "a worker's start") { () -> Bool in
      for await line in lines where line.hasPrefix("ready") { return true }
      return false
    }
    if !seen { throw chaosFailure("a worker ended before it was ready (is the URL right?)") }
  }

  func send(_ signal: Int32) {
    if process.isRunning { kill(process.processIdentifier, signal) }
  }

  /// Waits until the process has ended, at most `seconds`; kills it after that.
  func ended(within seconds: Double) async {
    let deadline = ContinuousClock.now + .seconds(seconds)
    // Looks every 20 ms, up to `seconds`; then SIGKILL, which the kernel carries out at once
    // (the last loop ends as soon as the process is reaped).
    while process.isRunning, ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(20))
    }
    if process.isRunning {
      kill(process.processIdentifier, SIGKILL)
      while process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
    }
  }
}

/// One worker of the run: delivers with the audit trail on until SIGTERM, or until the run that
/// started it is gone.
enum ChaosWorker {
  static func run(url: String, lease: Double, batch: Int) async throws {
    var logger = Logger(label: "orderly.chaos.worker")
    logger.logLevel = .critical
    let outbox = try await PostgresOutbox<ChaosMessage>(url: url, logger: logger) { $0.key }
    var options = FleetDeliveryOptions(
      limit: 16,
      batchSize: batch,
      lease: .milliseconds(Int(lease * 1_000)),
      pollInterval: .milliseconds(200)
    )
    options.audit = .on
    // The handler's work: a millisecond on the real clock, so that deliveries take time and a
    // kill can land in the middle of one.
    let handler: DeliveryHandler<ChaosMessage> =
      batch == 1
      ? .each { _ in try await Task.sleep(for: .milliseconds(1)) }
      : .batches { _ in try await Task.sleep(for: .milliseconds(1)) }
    try outbox.start(options, deliver: handler)
    signal(SIGTERM, SIG_IGN)
    let (terminations, termination) = AsyncStream.makeStream(of: Void.self)
    let source = DispatchSource.makeSignalSource(signal: SIGTERM)
    source.setEventHandler { termination.yield() }
    source.resume()
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    let parent = getppid()
    // Until SIGTERM, or until the run that started this worker has ended (the worker is then
    // the child of another process).
    // Looks every half second; cancelled once SIGTERM came.
    let watch = Task {
      while !Task.isCancelled, getppid() == parent {
        try? await Task.sleep(for: .milliseconds(500))
      }
      termination.yield()
    }
    for await _ in terminations { break }
    watch.cancel()
    source.cancel()
    await outbox.stop()
    await outbox.close()
  }
}

/// What a run found.
struct ChaosOutcome {
  var settings: ChaosSettings
  var schema: String
  var kills = 0
  var cuts = 0
  var appended = 0
  var delivered = 0
  var pending = 0
  var deadLetters = 0
  var drained = true
  var report: OutboxAuditReport?
  var repeatsAfterCut = 0
  var repeatsAfterFailure = 0
  var repeatsAfterKill = 0
  /// When each killed worker process was killed, by its process id.
  var killed: [Int32: Date] = [:]
  /// For each key a killed worker held: seconds from the kill to the next holder's first attempt.
  var failovers: [Double] = []
  var kept = false

  var lost: Int { max(0, appended - delivered - pending - deadLetters) }

  var isClean: Bool {
    (report?.isClean ?? false) && lost == 0 && drained && deadLetters == 0
  }

  func count(_ kind: OutboxAuditViolation.Kind) -> Int {
    report?.violations.filter { $0.kind == kind }.count ?? 0
  }

  var table: String {
    let s = settings
    let seconds = { (value: Double) in String(format: "%.2f s", value) }
    var rows = [
      ["appended", "\(appended)"],
      ["delivered", "\(delivered)"],
      ["lost", "\(lost)"],
      ["pending after the drain", "\(pending)"],
      ["dead letters", "\(deadLetters)"],
      ["order violations", "\(count(.outOfOrder))"],
      ["overlapping holders", "\(count(.overlap))"],
      ["acknowledged twice", "\(count(.acknowledgedTwice))"],
      ["vanished", "\(count(.vanished))"],
      ["fences not raised", "\(count(.fenceNotRaised))"],
      [
        "repeats",
        "\(repeatsAfterKill + repeatsAfterCut + repeatsAfterFailure) (\(repeatsAfterKill) after a "
          + "kill or a cut connection, \(repeatsAfterCut) after a lost lease, "
          + "\(repeatsAfterFailure) after a failed attempt)",
      ],
    ]
    let sorted = failovers.sorted()
    if sorted.isEmpty {
      rows.append(["failover after a kill", "no key was held by a killed worker"])
    } else {
      rows.append([
        "failover after a kill",
        "\(sorted.count) key(s): median \(seconds(sorted[sorted.count / 2])), worst "
          + "\(seconds(sorted[sorted.count - 1])) (lease \(seconds(s.lease)); from the kill to "
          + "the next holder's first attempt, with any wait for the key's next message)",
      ])
    }
    var lines = [
      "chaos: \(s.workers) worker(s), \(s.keys) key(s), \(s.messages) message(s) over "
        + "\(seconds(s.duration)), lease \(seconds(s.lease)), "
        + (s.batch == 1 ? "one at a time" : "batches of \(s.batch)")
        + "; \(kills) kill(s) (SIGKILL), \(cuts) connection cut(s); seed \(s.seed)"
    ]
    lines += OperatorReport.table(rows).split(separator: "\n").map { "  " + $0 }
    for violation in report?.violations.prefix(10) ?? [] {
      lines.append("VIOLATION \(violation.kind.rawValue): \(violation.detail)")
    }
    if !drained { lines.append("NOT DRAINED: \(pending) message(s) still pending") }
    if kept {
      lines.append(
        "schema \(schema) kept: orderly outbox audit --url '<URL>?search_path=\(schema)'"
      )
    }
    lines.append("verdict: " + (isClean ? "no violation" : "FAILED"))
    return lines.joined(separator: "\n")
  }
}

/// One run: schema, workers, appends and harm, drain, audit, clean-up.
struct ChaosRun {
  let settings: ChaosSettings
  let schema: String

  init(_ settings: ChaosSettings) {
    self.settings = settings
    schema =
      "orderly_chaos_"
      + UUID().uuidString.replacingOccurrences(of: "-", with: "")
      .prefix(12).lowercased()
  }

  /// The URL without its query, then this run's schema and an application name.
  private func url(_ application: String) -> String {
    let base = settings.url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
    return base + "?search_path=\(schema)&application_name=\(application)"
  }

  func run() async throws -> ChaosOutcome {
    guard let executable = Bundle.main.executableURL else {
      throw chaosFailure("cannot find this program's own path to start workers")
    }
    var logger = Logger(label: "orderly.chaos")
    logger.logLevel = .critical
    let quiet = logger
    // Connects once first, for the server's own word when it refuses (a wrong password, no
    // such database) or cannot be reached: a pool would keep trying instead. A database
    // without an outbox is what is expected here.
    do {
      let probe = try await PostgresOutbox<ChaosMessage>(
        url: settings.url,
        logger: quiet,
        creatingTables: false
      )
      await probe.close()
    } catch {
      guard case .notAnOutbox = error else { throw error }
    }
    let admin = PostgresClient(configuration: try .init(orderlyURL: settings.url))
    let adminRun = Task { await admin.run() }
    defer { adminRun.cancel() }
    let schema = schema
    do {
      try await within(30, "creating the schema") {
        try await admin.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: quiet)
      }
    } catch let error as OperatorFailure {
      throw error
    } catch {
      throw chaosFailure(
        "cannot create a schema on that server: \(String(reflecting: error)); check the URL and "
          + "that the user may create schemas"
      )
    }
    var outcome = ChaosOutcome(settings: settings, schema: schema)
    do {
      try await exercise(executable: executable, admin: admin, logger: quiet, into: &outcome)
    } catch {
      if !settings.keep { await drop(admin, logger: quiet) }
      throw error
    }
    if settings.keep {
      outcome.kept = true
    } else {
      await drop(admin, logger: quiet)
    }
    return outcome
  }

  private func drop(_ admin: PostgresClient, logger: Logger) async {
    let schema = schema
    _ = try? await within(30, "dropping the schema") {
      try await admin.query(
        PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"),
        logger: logger
      )
    }
  }

  private func exercise(
    executable: URL,
    admin: PostgresClient,
    logger: Logger,
    into outcome: inout ChaosOutcome
  ) async throws {
    let outbox = try await PostgresOutbox<ChaosMessage>(
      url: url("orderly-chaos-run"),
      logger: logger
    ) { $0.key }
    let settings = settings
    func start(_ index: Int) async throws -> ChaosProcess {
      let worker = try ChaosProcess(
        executable: executable,
        arguments: [
          "outbox", "chaos-worker", "--url", url("orderly-chaos-w\(index)"),
          "--lease", "\(settings.lease)", "--batch", "\(settings.batch)",
        ]
      )
      try await worker.ready()
      return worker
    }
    var workers: [ChaosProcess] = []
    for index in 0..<settings.workers { workers.append(try await start(index)) }
    let stopAll = { (workers: [ChaosProcess]) async in
      for worker in workers { worker.send(SIGTERM) }
      for worker in workers { await worker.ended(within: 15) }
    }

    // Appends spread over the duration, while the harm runs beside them: both paced on the real
    // clock (the tool's job is to do harm in real time), each sleep bounded by the duration.
    let began = ContinuousClock.now
    let total = settings.messages
    let appender = Task {
      var next = 0
      let ticks = max(1, Int(settings.duration * 10))
      for tick in 1...ticks {
        let until = min(total, total * tick / ticks)
        if until > next {
          let chunk = (next..<until).map { i in
            ChaosMessage(key: "k\(i % settings.keys)", n: i / settings.keys)
          }
          try await outbox.append(
            contentsOf: chunk,
            partition: nil,
            headers: [:],
            deliverAfter: nil
          )
          next = until
        }
        try await Task.sleep(until: began + .milliseconds(100 * tick))
      }
      return next
    }
    do {
      var random = ChaosRandom(seed: settings.seed)
      let events = 12
      let gap = settings.duration / Double(events)
      var elapsed = 0.0
      while true {
        let wait = gap * Double.random(in: 0.5...1.5, using: &random)
        elapsed += wait
        if elapsed >= settings.duration { break }
        try await Task.sleep(until: began + .milliseconds(Int(elapsed * 1_000)))
        let index = Int.random(in: 0..<workers.count, using: &random)
        if Bool.random(using: &random) {
          outcome.killed[workers[index].process.processIdentifier] = Date()
          workers[index].send(SIGKILL)
          await workers[index].ended(within: 15)
          workers[index] = try await start(index)
          outcome.kills += 1
        } else {
          let name = "orderly-chaos-w\(index)"
          try await within(30, "cutting a worker's connections") {
            try await admin.query(
              """
              SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name = \(name)
              """,
              logger: logger
            )
          }
          outcome.cuts += 1
        }
      }
      outcome.appended = try await appender.value

      // The drain: every message delivered or set aside, within 20 leases or a minute (looks
      // every 250 ms until then).
      let limit = max(60, settings.lease * 20)
      let deadline = ContinuousClock.now + .seconds(limit)
      var counts = try await outbox.counts()
      while counts.pending > 0, ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(250))
        counts = try await outbox.counts()
      }
      outcome.pending = counts.pending
      outcome.deadLetters = counts.deadLetters
      outcome.drained = counts.pending == 0
      await stopAll(workers)
    } catch {
      appender.cancel()
      await stopAll(workers)
      await outbox.close()
      throw error
    }

    guard let trail = try await outbox.auditTrail() else {
      await outbox.close()
      throw chaosFailure("the workers wrote no audit trail")
    }
    await outbox.close()
    outcome.report = trail.audit()
    measure(trail, into: &outcome)
  }

  /// Delivered messages, repeats and why, and how long keys waited for a new holder.
  private func measure(_ trail: OutboxAuditTrail, into outcome: inout ChaosOutcome) {
    var delivered = Set<UUID>()
    var rows: [UUID: [OutboxAuditRecord]] = [:]
    var byKey: [String: [OutboxAuditRecord]] = [:]
    for record in trail.records {
      rows[record.messageID, default: []].append(record)
      if record.outcome == .delivered { delivered.insert(record.messageID) }
      if record.outcome == .delivered || record.outcome == .cut || record.outcome == .retried {
        byKey[record.partition ?? "", default: []].append(record)
      }
    }
    outcome.delivered = delivered.count
    for (_, attempts) in rows {
      guard let last = attempts.max(by: { $0.attempt < $1.attempt }), last.attempt > 1 else {
        continue
      }
      for number in 1..<last.attempt {
        switch attempts.first(where: { $0.attempt == number })?.outcome {
        case .cut: outcome.repeatsAfterCut += 1
        case .retried: outcome.repeatsAfterFailure += 1
        default: outcome.repeatsAfterKill += 1
        }
      }
    }
    // The worker is named host/pid/start: a killed worker's rows are found by its pid.
    func pid(_ worker: String) -> Int32? {
      let parts = worker.split(separator: "/")
      return parts.count >= 3 ? Int32(parts[parts.count - 2]) : nil
    }
    for (_, records) in byKey {
      let ordered = records.sorted { $0.startedAt < $1.startedAt }
      for (before, after) in zip(ordered, ordered.dropFirst()) where before.worker != after.worker {
        guard let killedPid = pid(before.worker), let killedAt = outcome.killed[killedPid],
          before.endedAt <= killedAt, after.startedAt >= killedAt
        else { continue }
        outcome.failovers.append(after.startedAt.timeIntervalSince(killedAt))
      }
    }
  }
}
#endif
