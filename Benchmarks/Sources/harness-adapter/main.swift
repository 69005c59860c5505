// Orderly's adapter for the public PostgreSQL queue benchmark harness
// (hardbyte/postgresql-job-queue-benchmarking): one long-running process that produces at the
// harness's paced rate and delivers with `PostgresOutbox`, in order per key, as one replica of a
// fleet. See Benchmarks/Harness/README.md.
//
//   DATABASE_URL=postgres://bench:bench@localhost:15555/orderly_bench SCENARIO=long_horizon \
//     swift run -c release --package-path Benchmarks harness-adapter
//
// stdout is the harness's JSONL telemetry (a descriptor, then samples every SAMPLE_EVERY_S);
// stderr is logs. Settings come from the environment the harness sets (CONTRIBUTING_ADAPTERS.md
// in the harness), plus BENCH_KEYS (keys the producer spreads its messages over, default 1,000)
// and ORDERLY_LEASE_MS / ORDERLY_POLL_MS / ORDERLY_CONNECTIONS, and ORDERLY_BATCH (up to how many
// consecutive messages of a key one delivery gets: 1, the default, delivers one at a time; more
// uses ordered batches, each job's work done in turn), and ORDERLY_AUDIT (1: every delivery
// attempt is written to the outbox's audit trail; 0, the default: none).
//
//   harness-adapter check
//
// reads the database at DATABASE_URL once the replicas are gone (Benchmarks/Harness/run.py runs
// it after each cell and its final drain), and prints one JSON object: the messages left, the
// dead letters, and the audit of every replica's deliveries together (the checks of `orderly
// outbox audit`: order per key, overlaps, messages acknowledged twice, vanished messages,
// fences). It exits 0 when it could read them, whatever they say.
//
// Every message carries its key, the producing process and a number per key and producer. Each
// delivery is checked against the ones this process delivered before it: an `order_violations`
// sample counts the deliveries that came out of their key's order (it must stay 0).
import Foundation
import Logging
import OrderlyPostgres
import PostgresNIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Settings

struct Settings: Sendable {
  var url = ""
  var producerMode = "fixed"
  var producerRate = 800
  var pacing = "harness"
  var batchMax = 128
  var batchMilliseconds = 25
  var targetDepth = 1000
  var workers = 32
  var payloadBytes = 256
  var workMilliseconds = 1
  var sampleEvery = 5
  var instance = 0
  var keys = 1000
  var leaseMilliseconds = 5000
  var pollMilliseconds = 500
  var connections = 16
  var batch = 1
  var audit = false
  var rateControlFile: String?

  /// The settings from the environment; a bad value ends the process, saying which and why.
  static func fromEnvironment() -> Settings {
    let environment = ProcessInfo.processInfo.environment
    func integer(_ name: String, _ fallback: Int, atLeast minimum: Int) -> Int {
      guard let text = environment[name], !text.isEmpty else { return fallback }
      guard let value = Int(text), value >= minimum else {
        fail("\(name) must be a whole number, \(minimum) or more (got \"\(text)\")")
      }
      return value
    }
    func choice(_ name: String, _ fallback: String, of allowed: [String]) -> String {
      let value = environment[name].flatMap { $0.isEmpty ? nil : $0 } ?? fallback
      guard allowed.contains(value) else {
        fail("\(name) must be one of \(allowed.joined(separator: ", ")) (got \"\(value)\")")
      }
      return value
    }
    var settings = Settings()
    guard let url = environment["DATABASE_URL"], !url.isEmpty else {
      fail("DATABASE_URL is not set: give the database the harness created for this system")
    }
    settings.url = url
    let scenario = environment["SCENARIO"] ?? "long_horizon"
    guard scenario == "long_horizon" else {
      fail("SCENARIO must be long_horizon, the harness's lifecycle mode (got \"\(scenario)\")")
    }
    settings.producerMode = choice("PRODUCER_MODE", "fixed", of: ["fixed", "depth-target"])
    settings.producerRate = integer("PRODUCER_RATE", 800, atLeast: 0)
    settings.pacing = choice("PRODUCER_PACING", "harness", of: ["harness", "adapter"])
    settings.batchMax = integer("PRODUCER_BATCH_MAX", 128, atLeast: 1)
    settings.batchMilliseconds = integer("PRODUCER_BATCH_MS", 25, atLeast: 1)
    settings.targetDepth = integer("TARGET_DEPTH", 1000, atLeast: 0)
    settings.workers = integer("WORKER_COUNT", 32, atLeast: 1)
    settings.payloadBytes = integer("JOB_PAYLOAD_BYTES", 256, atLeast: 0)
    settings.workMilliseconds = integer("JOB_WORK_MS", 1, atLeast: 0)
    settings.sampleEvery = integer("SAMPLE_EVERY_S", 5, atLeast: 1)
    settings.instance = integer("BENCH_INSTANCE_ID", 0, atLeast: 0)
    settings.keys = integer("BENCH_KEYS", 1000, atLeast: 1)
    settings.leaseMilliseconds = integer("ORDERLY_LEASE_MS", 5000, atLeast: 400)
    settings.pollMilliseconds = integer("ORDERLY_POLL_MS", 500, atLeast: 1)
    settings.connections = integer("ORDERLY_CONNECTIONS", 16, atLeast: 1)
    settings.batch = integer("ORDERLY_BATCH", 1, atLeast: 1)
    settings.audit = choice("ORDERLY_AUDIT", "0", of: ["0", "1"]) == "1"
    settings.rateControlFile = environment["PRODUCER_RATE_CONTROL_FILE"].flatMap {
      $0.isEmpty ? nil : $0
    }
    return settings
  }
}

func fail(_ text: String) -> Never {
  FileHandle.standardError.write(Data(("harness-adapter: " + text + "\n").utf8))
  exit(2)
}

func log(_ text: String) {
  FileHandle.standardError.write(Data(("[orderly] " + text + "\n").utf8))
}

// MARK: - Telemetry

/// One JSON object per line on stdout, written whole (one `write` each).
enum Telemetry {
  static let lock = Mutex<Void>(())

  static func emit(_ record: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: record, options: [.sortedKeys])
    else { return }
    lock.withLock { _ in FileHandle.standardOutput.write(data + Data("\n".utf8)) }
  }

  static func now() -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: Date())
  }
}

/// Latencies in microseconds, 3 significant figures, in a fixed number of buckets (values up to
/// about 71 minutes): below 2,048 µs one bucket per microsecond, above it 1,024 buckets per
/// doubling.
struct Histogram {
  static let bucketCount = 2048 + 22 * 1024
  var counts = [UInt32](repeating: 0, count: bucketCount)
  var total = 0

  static func bucket(_ microseconds: UInt64) -> Int {
    if microseconds < 2048 { return Int(microseconds) }
    let shift = min(UInt64.bitWidth - microseconds.leadingZeroBitCount - 11, 22)
    let top = min(microseconds >> UInt64(shift), 2047)
    return 2048 + (shift - 1) * 1024 + Int(top - 1024)
  }

  /// The middle of a bucket's range, in microseconds.
  static func value(ofBucket index: Int) -> Double {
    if index < 2048 { return Double(index) }
    let shift = (index - 2048) / 1024 + 1
    let top = (index - 2048) % 1024 + 1024
    return (Double(top) + 0.5) * Double(1 << shift)
  }

  mutating func record(microseconds: UInt64) {
    counts[Self.bucket(microseconds)] &+= 1
    total += 1
  }

  mutating func add(_ other: Histogram) {
    for index in counts.indices where other.counts[index] != 0 {
      counts[index] &+= other.counts[index]
    }
    total += other.total
  }

  /// The values at `quantiles` (each 0...1), in milliseconds; zeros when empty.
  func milliseconds(at quantiles: [Double]) -> [Double] {
    guard total > 0 else { return quantiles.map { _ in 0 } }
    var results: [Double] = []
    var seen = 0
    var index = 0
    for quantile in quantiles {
      let rank = max(1, Int((quantile * Double(total)).rounded(.up)))
      while index < counts.count && seen + Int(counts[index]) < rank {
        seen += Int(counts[index])
        index += 1
      }
      results.append(Self.value(ofBucket: min(index, counts.count - 1)) / 1000)
    }
    return results
  }
}

/// What this process saw: appends, acknowledged deliveries, claim latencies over the last 30
/// seconds (six 5-second histograms, reused in turn), and the order check.
final class Stats: Sendable {
  private struct KeyProgress {
    var sequence: Int
    var fence: Int64
  }

  private struct State {
    var enqueued = 0
    var completed = 0
    var violations = 0
    var windows = [(slot: Int, histogram: Histogram)](repeating: (-1, Histogram()), count: 6)
    var progress: [String: KeyProgress] = [:]
  }

  private let state = Mutex(State())
  private let start = ContinuousClock.now
  /// How far back a delivery under a newer lease may start: the messages of a batch that was
  /// cut before its acknowledgement come again (1, one message at a time: only the last).
  private let redelivered: Int

  init(batch: Int) { redelivered = batch - 1 }

  private func slot() -> Int {
    Int((ContinuousClock.now - start).components.seconds / 5)
  }

  func appended(_ count: Int) { state.withLock { $0.enqueued += count } }
  func completed() { state.withLock { $0.completed += 1 } }

  /// A delivery starts: its claim latency, and whether it keeps its key's order.
  ///
  /// Per key and producer, a delivery's number never goes below the last one this process
  /// delivered (under a newer lease, below the first of the batch that was cut), and its lease
  /// (fence) is never older than the last one's.
  func started(_ message: BenchMessage, fence: Int64) {
    let latency = max(0, Date().timeIntervalSince1970 * 1000 - message.createdAt)
    let slot = slot()
    state.withLock { state in
      let ring = slot % state.windows.count
      if state.windows[ring].slot != slot { state.windows[ring] = (slot, Histogram()) }
      state.windows[ring].histogram.record(microseconds: UInt64(latency * 1000))
      let id = "\(message.key)/\(message.producer)"
      if let last = state.progress[id] {
        // The same number again is a delivery tried again; a gap is a batch that was not
        // stored, or messages another replica delivered meanwhile.
        // Under a newer lease, a batch cut before its acknowledgement comes again from its
        // first message, at most `redelivered` before the last one delivered.
        let inOrder =
          fence == last.fence
          ? message.sequence >= last.sequence
          : fence > last.fence && message.sequence >= last.sequence - redelivered
        if !inOrder {
          state.violations += 1
          log(
            "order violation: key \(message.key) producer \(message.producer): #\(message.sequence)"
              + " (fence \(fence)) after #\(last.sequence) (fence \(last.fence))"
          )
        }
      }
      state.progress[id] = KeyProgress(sequence: message.sequence, fence: fence)
    }
  }

  /// Counts so far, and the claim latency's p50, p95 and p99 over the last 30 seconds.
  func snapshot() -> (enqueued: Int, completed: Int, violations: Int, claim: [Double]) {
    let slot = slot()
    return state.withLock { state in
      var merged = Histogram()
      for window in state.windows where window.slot > slot - state.windows.count {
        merged.add(window.histogram)
      }
      return (
        state.enqueued, state.completed, state.violations,
        merged.milliseconds(at: [0.5, 0.95, 0.99])
      )
    }
  }
}

// MARK: - Messages

struct BenchMessage: Codable, Sendable {
  let key: Int
  /// The producing process (its instance and process id: a restarted replica numbers anew).
  let producer: String
  /// The message's number among its producer's messages for its key, from 0.
  let sequence: Int
  /// When it was made, in milliseconds since 1970 (for the claim latency).
  let createdAt: Double
  let padding: String
}

/// Appends batches of messages, each batch in one call (one transaction, one statement),
/// spreading them over the keys round robin.
final class Producer: Sendable {
  private let outbox: PostgresOutbox<BenchMessage>
  private let settings: Settings
  private let stats: Stats
  private let name: String
  private let padding: String
  private let cursor = Mutex<(nextKey: Int, sequences: [Int])>((0, []))
  private let logger: Logger

  init(
    outbox: PostgresOutbox<BenchMessage>,
    settings: Settings,
    stats: Stats,
    logger: Logger
  ) {
    self.outbox = outbox
    self.settings = settings
    self.stats = stats
    self.logger = logger
    name = "\(settings.instance)-\(getpid())"
    padding = String(repeating: "x", count: max(0, settings.payloadBytes - 64))
    cursor.withLock {
      $0 = (Int.random(in: 0..<settings.keys), [Int](repeating: 0, count: settings.keys))
    }
  }

  /// Appends `count` messages, in batches of at most PRODUCER_BATCH_MAX.
  func produce(_ count: Int) async {
    var left = count
    while left > 0 {
      let size = min(left, settings.batchMax)
      left -= size
      await appendBatch(size)
    }
  }

  private func appendBatch(_ size: Int) async {
    let (first, sequences) = cursor.withLock { ($0.nextKey, $0.sequences) }
    var batch: [BenchMessage] = []
    var next = sequences
    let now = Date().timeIntervalSince1970 * 1000
    for offset in 0..<size {
      let key = (first + offset) % settings.keys
      batch.append(
        BenchMessage(
          key: key,
          producer: name,
          sequence: next[key],
          createdAt: now,
          padding: padding
        )
      )
      next[key] += 1
    }
    // The numbers are used up whether the batch is stored or not: a batch whose commit failed
    // may have been stored all the same, and a number is never sent twice.
    cursor.withLock { $0 = ((first + size) % settings.keys, next) }
    do {
      // One statement for the batch, over all its keys (the outbox's partition closure names
      // each message's key).
      try await outbox.append(contentsOf: batch, partition: nil)
      stats.appended(size)
    } catch {
      // Stopping (SIGTERM) cancels the batch under way: not a failure to report.
      if !Task.isCancelled {
        log("producer: a batch of \(size) was not stored: \(String(reflecting: error))")
      }
    }
  }
}

// MARK: - The process

let settings = Settings.fromEnvironment()
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.isEmpty || arguments == ["check"] else {
  fail(
    "unknown arguments \(arguments.joined(separator: " ")): run with none (a replica), or with"
      + " `check` (the report after a cell)"
  )
}
let checking = arguments == ["check"]
// Logs go to standard error: standard output is the harness's telemetry.
LoggingSystem.bootstrap(StreamLogHandler.standardError)
var logger = Logger(label: "orderly.harness")
// ORDERLY_LOG=debug (or trace, info, ...) says more, on standard error.
logger.logLevel =
  ProcessInfo.processInfo.environment["ORDERLY_LOG"].flatMap { Logger.Level(rawValue: $0) }
  ?? .error

let databaseName = URLComponents(string: settings.url)?.path.split(separator: "/").first.map(
  String.init
)
// A replica says what it is first; the check writes only its report.
if !checking {
  Telemetry.emit([
    "kind": "descriptor",
    "system": "orderly",
    "event_tables": [
      "public.orderly_outbox_message", "public.orderly_outbox_lease",
      "public.orderly_outbox_line", "public.orderly_outbox_dead_letter",
    ],
    "extensions": [String](),
    "version": "orderly-main",
    "schema_version": "2",
    "db_name": databaseName ?? "orderly_bench",
    "started_at": Telemetry.now(),
    "instance_id": settings.instance,
  ])
}

var configuration: PostgresClient.Configuration
do {
  configuration = try PostgresClient.Configuration(orderlyURL: settings.url)
} catch {
  fail("DATABASE_URL is not a PostgreSQL URL: \(error)")
}
configuration.options.maximumConnections = settings.connections
configuration.options.additionalStartupParameters.append(("application_name", "orderly-harness"))
let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
let clientRun = Task { await client.run() }

// The schema is made (or checked) by the first worker; replicas starting at once race for it,
// and every one tries again until it is there.
var opened: PostgresOutbox<BenchMessage>?
for attempt in 1...30 {
  do {
    opened = try await PostgresOutbox<BenchMessage>(
      client: client,
      logger: logger,
      partition: { "k\($0.key)" }
    )
    break
  } catch {
    log("opening the outbox failed (attempt \(attempt)): \(error)")
    try await Task.sleep(for: .seconds(1))
  }
}
guard let outbox = opened else { fail("could not open the outbox in 30 tries") }

if checking {
  do {
    try await printCheck(of: outbox)
  } catch {
    fail("could not read the outbox for the check: \(error)")
  }
  clientRun.cancel()
  exit(0)
}

/// The report of `harness-adapter check`, on standard output: messages left, dead letters, and
/// the audit of the whole trail (every replica's deliveries together).
func printCheck(of outbox: PostgresOutbox<BenchMessage>) async throws {
  let pending = try await outbox.pendingCount()
  let deadLetters = try await outbox.deadLetterCount()
  var record: [String: Any] = ["pending": pending, "dead_letters": deadLetters]
  if let trail = try await outbox.auditTrail() {
    let report = trail.audit()
    var kinds: [String: Int] = [:]
    for kind in OutboxAuditViolation.Kind.allCases { kinds[kind.rawValue] = 0 }
    for violation in report.violations { kinds[violation.kind.rawValue, default: 0] += 1 }
    record["audit"] = [
      "attempts": report.attempts, "keys": report.keys, "delivered": report.delivered,
      "cut": report.cut, "repeated": report.repeated, "numbers_checked": report.numbersChecked,
      "violations": kinds,
      // The first few, with what proves them; `orderly outbox audit` prints them all.
      "examples": report.violations.prefix(10).map { "\($0.kind.rawValue): \($0.detail)" },
    ]
  }
  guard
    let data = try? JSONSerialization.data(withJSONObject: record, options: [.sortedKeys])
  else { fail("the check's report did not encode") }
  FileHandle.standardOutput.write(data + Data("\n".utf8))
}

let stats = Stats(batch: settings.batch)
let workDuration = Duration.milliseconds(settings.workMilliseconds)
// Acknowledged deliveries are counted from the outbox's events: a delivery whose acknowledgement
// the fence refused, or that a crash cut, is counted by whoever delivers it again.
let events = outbox.events
let counting = Task {
  for await event in events {
    if case .delivered = event { stats.completed() }
  }
}
do {
  var options = FleetDeliveryOptions(
    limit: settings.workers,
    batchSize: settings.batch,
    lease: .milliseconds(settings.leaseMilliseconds),
    pollInterval: .milliseconds(settings.pollMilliseconds)
  )
  options.audit = settings.audit ? .on : .off
  if settings.batch > 1 {
    try outbox.start(
      options,
      deliver: .batches { envelopes in
        for envelope in envelopes {
          stats.started(envelope.message, fence: envelope.fence ?? 0)
          if settings.workMilliseconds > 0 { try await Task.sleep(for: workDuration) }
        }
      }
    )
  } else {
    try outbox.start(
      options,
      deliver: .each { envelope in
        stats.started(envelope.message, fence: envelope.fence ?? 0)
        if settings.workMilliseconds > 0 { try await Task.sleep(for: workDuration) }
      }
    )
  }
} catch {
  fail("could not start delivering: \(error)")
}

let producer = Producer(
  outbox: outbox,
  settings: settings,
  stats: stats,
  logger: logger
)
let depth = Atomic<Int>(0)

/// The harness's pacing: `ENQUEUE <n>` lines on stdin, read on a thread of their own.
func harnessTokens() -> AsyncStream<Int> {
  let (stream, continuation) = AsyncStream<Int>.makeStream()
  let thread = Thread {
    while let line = readLine() {
      let parts = line.split(separator: " ")
      if parts.count == 2, parts[0] == "ENQUEUE", let count = Int(parts[1]), count > 0 {
        continuation.yield(count)
      }
    }
    continuation.finish()
  }
  thread.start()
  return stream
}

/// The rate in the harness's control file (changed in its high-load phases), or PRODUCER_RATE.
func currentRate() -> Double {
  guard let path = settings.rateControlFile,
    let text = try? String(contentsOfFile: path, encoding: .utf8),
    let rate = Double(text.trimmingCharacters(in: .whitespacesAndNewlines))
  else { return Double(settings.producerRate) }
  return rate
}

let producing = Task {
  if settings.producerMode == "fixed" && settings.pacing == "harness" {
    var owed = 0
    var tokens = harnessTokens().makeAsyncIterator()
    while let count = await tokens.next() {
      owed += count
      // Tokens that came while a batch was being written are appended together.
      await producer.produce(owed)
      owed = 0
    }
    return
  }
  let period = Duration.milliseconds(settings.batchMilliseconds)
  var credit = 0.0
  var last = ContinuousClock.now
  while !Task.isCancelled {
    try? await Task.sleep(for: period)
    let now = ContinuousClock.now
    let elapsed = now - last
    last = now
    if settings.producerMode == "depth-target" {
      let wanted = settings.targetDepth - depth.load(ordering: .relaxed)
      if wanted > 0 {
        let size = min(wanted, settings.batchMax)
        await producer.produce(size)
        // Counted at once, so the next tick does not append again what the last poll of the
        // depth has not seen yet.
        depth.add(size, ordering: .relaxed)
      }
      continue
    }
    // Credited on real elapsed time, not per loop.
    let seconds =
      Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    credit += currentRate() * seconds
    let whole = Int(credit)
    if whole > 0 {
      credit -= Double(whole)
      await producer.produce(whole)
    }
  }
}

// Queue depth: the harness's observer metric (sent by instance 0), and what a depth-target
// producer fills up to (polled as often as the harness's own adapters do, every 200 ms).
let depthPolling = Task {
  let every: Duration =
    settings.producerMode == "depth-target" ? .milliseconds(200) : .milliseconds(500)
  while !Task.isCancelled {
    if let pending = try? await outbox.pendingCount() {
      depth.store(pending, ordering: .relaxed)
    }
    try? await Task.sleep(for: every)
  }
}

func emitSample(previous: inout (enqueued: Int, completed: Int, at: ContinuousClock.Instant)) {
  let snapshot = stats.snapshot()
  let now = ContinuousClock.now
  let elapsed = now - previous.at
  let seconds = max(
    0.001,
    Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
  )
  let time = Telemetry.now()
  var metrics: [(String, Double, Double)] = [
    ("claim_p50_ms", snapshot.claim[0], 30),
    ("claim_p95_ms", snapshot.claim[1], 30),
    ("claim_p99_ms", snapshot.claim[2], 30),
    (
      "enqueue_rate", Double(snapshot.enqueued - previous.enqueued) / seconds,
      Double(settings.sampleEvery)
    ),
    (
      "completion_rate", Double(snapshot.completed - previous.completed) / seconds,
      Double(settings.sampleEvery)
    ),
    ("order_violations", Double(snapshot.violations), 0),
  ]
  if settings.instance == 0 {
    metrics.append(("queue_depth", Double(depth.load(ordering: .relaxed)), 0))
    metrics.append(("producer_target_rate", currentRate(), 0))
  }
  for (metric, value, window) in metrics {
    Telemetry.emit([
      "t": time, "system": "orderly", "kind": "adapter", "subject_kind": "adapter",
      "subject": "", "metric": metric, "value": value, "window_s": window,
      "instance_id": settings.instance,
    ])
  }
  previous = (snapshot.enqueued, snapshot.completed, now)
}

let sampling = Task {
  // The first tick on the next wall-clock multiple of SAMPLE_EVERY_S, so that every system's
  // samples line up.
  let every = Double(settings.sampleEvery)
  let wall = Date().timeIntervalSince1970
  try? await Task.sleep(
    for: .milliseconds(Int64((every - wall.truncatingRemainder(dividingBy: every)) * 1000))
  )
  var previous = (
    enqueued: stats.snapshot().enqueued, completed: stats.snapshot().completed,
    at: ContinuousClock.now
  )
  var next = ContinuousClock.now
  while !Task.isCancelled {
    next += .seconds(settings.sampleEvery)
    try? await Task.sleep(until: next)
    if Task.isCancelled { break }
    emitSample(previous: &previous)
  }
}

// SIGTERM or SIGINT: stop producing, stop delivering (within the harness's 5 seconds), exit 0.
let (stopSignals, stopContinuation) = AsyncStream<Void>.makeStream()
signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
let sources = [SIGTERM, SIGINT].map { number in
  let source = DispatchSource.makeSignalSource(signal: number)
  source.setEventHandler { stopContinuation.yield() }
  source.resume()
  return source
}
for await _ in stopSignals { break }
log("stopping")
producing.cancel()
sampling.cancel()
depthPolling.cancel()
await outbox.stop(gracePeriod: .seconds(2))
counting.cancel()
clientRun.cancel()
_ = sources
exit(0)
