// Built with the Postgres trait only; see Package.swift.
#if Postgres
import BuiltProducts
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the fleet's workers (`outbox-postgres-probe`) deliver.
struct FleetMessage: Codable, Sendable {
  let key: String
  let n: Int
  var poison = false
  var holdMs = 0
}

/// One delivery a worker recorded (in `fleet_delivery`).
struct Delivery: Sendable {
  let worker: String
  let key: String
  let n: Int
  let id: UUID
  let fence: Int64
  let started: Date
  let ended: Date
}

/// Worker processes delivering one test's outbox.
final class Fleet: Sendable {
  let database: TestDatabase
  let lease: Int
  let poll: Int
  let limit: Int
  /// Variables set for each worker (`ORDERLY_PROBE_FAIR_SHARES`, ...).
  let environment: [String: String]
  private let workers = Mutex<[BuiltProducts.Running]>([])

  init(
    _ database: TestDatabase,
    lease: Int,
    poll: Int,
    limit: Int,
    environment: [String: String] = [:]
  ) {
    self.database = database
    self.lease = lease
    self.poll = poll
    self.limit = limit
    self.environment = environment
  }

  /// Starts a worker and waits until it delivers.
  @discardableResult
  func start() async throws -> Int {
    let worker = try BuiltProducts.Running(
      "outbox-postgres-probe",
      arguments: [
        "work", database.url, database.schema, "\(limit)", "\(lease)", "\(poll)", "stop",
      ],
      environment: environment
    )
    let ready = await worker.readLines(1)
    guard ready.first?.hasPrefix("ready ") == true else {
      let ended = await worker.finish()
      throw FleetFailure(description: "a worker did not start: \(ended.stderr)")
    }
    return workers.withLock { workers in
      workers.append(worker)
      return workers.count - 1
    }
  }

  var count: Int { workers.withLock { $0.count } }

  /// Kills a worker with SIGKILL and starts another in its place.
  func killAndReplace(_ index: Int) async throws {
    let victim = workers.withLock { $0[index] }
    victim.send(SIGKILL)
    _ = await victim.finish()
    let worker = try BuiltProducts.Running(
      "outbox-postgres-probe",
      arguments: [
        "work", database.url, database.schema, "\(limit)", "\(lease)", "\(poll)", "stop",
      ],
      environment: environment
    )
    _ = await worker.readLines(1)
    workers.withLock { $0[index] = worker }
  }

  /// Stops a worker with SIGTERM (a graceful stop), and returns what it printed.
  func terminate(_ index: Int) async -> String {
    let worker = workers.withLock { $0[index] }
    worker.send(SIGTERM)
    let ended = await worker.finish()
    return ended.stdout + ended.stderr
  }

  func terminateAll() async {
    for index in 0..<count { _ = await terminate(index) }
  }
}

struct FleetFailure: Error, CustomStringConvertible {
  let description: String
}

extension TestDatabase {
  /// The fleet's tables: what workers delivered, and the app's per-key counter.
  func createFleetTables() async throws {
    try await execute(
      """
      CREATE TABLE fleet_delivery (
        worker text NOT NULL, key text NOT NULL, n integer NOT NULL, id uuid NOT NULL,
        fence bigint NOT NULL, attempt integer NOT NULL,
        started_at timestamptz NOT NULL, ended_at timestamptz NOT NULL
      )
      """
    )
    try await execute("CREATE TABLE fleet_counter (key text PRIMARY KEY, n integer NOT NULL)")
  }

  /// Appends `total` messages over `keys` keys from `appenders` tasks at once.
  ///
  /// Each transaction takes 25 keys (in key order), and for each one numbers the message with the
  /// app's counter for that key and appends it, in the same transaction: the counter's order is
  /// the order the transactions commit, which the outbox must deliver in.
  func appendFleet(
    _ outbox: PostgresOutbox<FleetMessage>,
    client: PostgresClient,
    total: Int,
    keys: Int,
    appenders: Int
  ) async throws {
    let perTransaction = 25
    let transactions = total / perTransaction
    try await withThrowingTaskGroup(of: Void.self) { group in
      for appender in 0..<appenders {
        group.addTask {
          var generator = SystemRandomNumberGenerator()
          for _ in stride(from: appender, to: transactions, by: appenders) {
            var chosen = Set<Int>()
            while chosen.count < perTransaction {
              chosen.insert(Int.random(in: 0..<keys, using: &generator))
            }
            let names = chosen.map { String(format: "key-%04d", $0) }.sorted()
            try await client.withTransaction(logger: TestServer.logger) { connection in
              for key in names {
                var n = 0
                let rows = try await connection.query(
                  """
                  INSERT INTO fleet_counter (key, n) VALUES (\(key), 1)
                  ON CONFLICT (key) DO UPDATE SET n = fleet_counter.n + 1 RETURNING n
                  """,
                  logger: TestServer.logger
                )
                for try await value in rows.decode(Int.self) { n = value }
                try await outbox.append(FleetMessage(key: key, n: n), on: connection)
              }
            }
          }
        }
      }
      try await group.waitForAll()
    }
  }

  func deliveries() async throws -> [Delivery] {
    var all: [Delivery] = []
    try await admin.withConnection { connection in
      try await connection.query(
        PostgresQuery(unsafeSQL: "SET search_path TO \(self.schema)"),
        logger: TestServer.logger
      )
      let rows = try await connection.query(
        "SELECT worker, key, n, id, fence, started_at, ended_at FROM fleet_delivery",
        logger: TestServer.logger
      )
      for try await (worker, key, n, id, fence, started, ended) in rows.decode(
        (String, String, Int, UUID, Int64, Date, Date).self
      ) {
        all.append(
          Delivery(
            worker: worker,
            key: key,
            n: n,
            id: id,
            fence: fence,
            started: started,
            ended: ended
          )
        )
      }
    }
    return all
  }

  func fleetCount(_ sql: String) async throws -> Int {
    Int(try await fleetValues(sql, as: Int64.self).last ?? 0)
  }

  /// The values of a query's one column, in order, in this test's schema.
  func fleetValues<T: PostgresDecodable & Sendable>(_ sql: String, as _: T.Type) async throws
    -> [T]
  {
    var values: [T] = []
    try await admin.withConnection { connection in
      try await connection.query(
        PostgresQuery(unsafeSQL: "SET search_path TO \(self.schema)"),
        logger: TestServer.logger
      )
      for try await value in try await connection.query(
        PostgresQuery(unsafeSQL: sql),
        logger: TestServer.logger
      ).decode(T.self) {
        values.append(value)
      }
    }
    return values
  }
}

/// Per key: deliveries in the order they began.
func byKey(_ deliveries: [Delivery]) -> [String: [Delivery]] {
  Dictionary(grouping: deliveries, by: \.key).mapValues { line in
    line.sorted { ($0.started, $0.ended) < ($1.started, $1.ended) }
  }
}

/// What is wrong with one key's deliveries, or `nil`.
///
/// Numbers must go 1, 2, 3... (a number may repeat right after itself: delivered again after a kill), end at `last`, fences must
/// never go down, and no delivery may begin before the one before it ended.
func problem(in line: [Delivery], last: Int) -> String? {
  var expected = 1
  for (index, delivery) in line.enumerated() {
    if index > 0 {
      let before = line[index - 1]
      if delivery.n == before.n {
        // A delivery again of the same message.
      } else if delivery.n != expected {
        return "\(delivery.key): #\(delivery.n) after #\(before.n)"
      }
      if delivery.fence < before.fence {
        return "\(delivery.key): fence \(delivery.fence) after \(before.fence)"
      }
      if delivery.started < before.ended {
        return "\(delivery.key): #\(delivery.n) (\(delivery.worker), fence \(delivery.fence)) "
          + "began before #\(before.n) (\(before.worker), fence \(before.fence)) ended"
      }
    } else if delivery.n != 1 {
      return "\(delivery.key): begins at #\(delivery.n)"
    }
    if delivery.n == expected { expected += 1 }
  }
  return expected - 1 == last
    ? nil : "\(line.first?.key ?? "?"): ends at #\(expected - 1), not #\(last)"
}

// The time limit only catches a hang: on a quiet 2-core machine the first two tests take 6-8
// minutes each in a debug build (measured 488 s and 377 s); under load they take longer.
@Suite("PostgresOutbox across worker processes", .serialized, .timeLimit(.minutes(20)))
struct FleetTests {
  @Test("4 workers deliver 50,000 messages over 1,000 keys: per key in commit order, each once")
  func fleet() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.createFleetTables()
    let client = try database.client(maximumConnections: 12)
    let outbox = try await database.outbox(of: FleetMessage.self, client: client) { $0.key }
    let fleet = Fleet(database, lease: 5000, poll: 200, limit: 8)
    for _ in 0..<4 { try await fleet.start() }
    try await database.appendFleet(outbox, client: client, total: 50_000, keys: 1_000, appenders: 8)
    #expect(
      await eventually(upTo: .seconds(400), every: .milliseconds(250)) {
        let recorded = try await database.fleetCount("SELECT count(*)::bigint FROM fleet_delivery")
        let pending = try await outbox.pendingCount()
        return recorded >= 50_000 && pending == 0
      }
    )
    await fleet.terminateAll()
    let deliveries = try await database.deliveries()
    #expect(deliveries.count == 50_000)
    #expect(Set(deliveries.map(\.id)).count == 50_000)
    #expect(Set(deliveries.map(\.worker)).count == 4)
    let lasts = try await database.counters()
    var problems: [String] = []
    for (key, line) in byKey(deliveries) {
      if let problem = problem(in: line, last: lasts[key] ?? -1) { problems.append(problem) }
    }
    #expect(problems.isEmpty, "\(problems.prefix(5))")
    #expect(byKey(deliveries).count == lasts.count)
  }

  @Test("20 workers killed with SIGKILL and restarted: nothing lost, order per key, no overlap")
  func kills() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.createFleetTables()
    let client = try database.client(maximumConnections: 12)
    let outbox = try await database.outbox(of: FleetMessage.self, client: client) { $0.key }
    let fleet = Fleet(database, lease: 3000, poll: 200, limit: 8)
    for _ in 0..<4 { try await fleet.start() }
    let appending = Task {
      try await database.appendFleet(
        outbox,
        client: client,
        total: 50_000,
        keys: 1_000,
        appenders: 8
      )
    }
    var kills = 0
    while kills < 20 {
      // Paced, not asserted: kills spread over the run.
      try await Task.sleep(for: .milliseconds(600))
      try await fleet.killAndReplace(Int.random(in: 0..<fleet.count))
      kills += 1
    }
    try await appending.value
    #expect(
      await eventually(upTo: .seconds(400), every: .milliseconds(250)) {
        try await outbox.pendingCount() == 0
      }
    )
    await fleet.terminateAll()
    let deliveries = try await database.deliveries()
    #expect(Set(deliveries.map(\.id)).count == 50_000)
    #expect(try await outbox.deadLetterCount() == 0)
    let lasts = try await database.counters()
    var problems: [String] = []
    for (key, line) in byKey(deliveries) {
      if let problem = problem(in: line, last: lasts[key] ?? -1) { problems.append(problem) }
    }
    #expect(problems.isEmpty, "\(problems.prefix(5))")
  }

  @Test("a worker stopped with SIGTERM hands its keys over at once, not after its lease")
  func gracefulHandOver() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.createFleetTables()
    let client = try database.client()
    let outbox = try await database.outbox(of: FleetMessage.self, client: client) { $0.key }
    // A 120-second lease: a hand-over that waited for it would take two minutes.
    let fleet = Fleet(database, lease: 120_000, poll: 200, limit: 8)
    try await fleet.start()
    var messages: [FleetMessage] = []
    for key in 0..<16 {
      for n in 1...10 { messages.append(FleetMessage(key: "key-\(key)", n: n, holdMs: 20)) }
    }
    try await outbox.append(contentsOf: messages)
    #expect(
      await eventually {
        try await database.fleetCount("SELECT count(*)::bigint FROM fleet_delivery") >= 8
      }
    )
    try await fleet.start()
    let stoppedAt = ContinuousClock.now
    let said = await fleet.terminate(0)
    #expect(said.contains("stopped"), "\(said.suffix(2_000))")
    #expect(
      await eventually(upTo: .seconds(100), every: .milliseconds(100)) {
        try await outbox.pendingCount() == 0
      }
    )
    #expect(ContinuousClock.now - stoppedAt < .seconds(60))
    await fleet.terminateAll()
    let deliveries = try await database.deliveries()
    #expect(Set(deliveries.map(\.id)).count == 160)
    var problems: [String] = []
    for (key, line) in byKey(deliveries) {
      if let problem = problem(in: line, last: 10) { problems.append(problem) }
      _ = key
    }
    #expect(problems.isEmpty, "\(problems.prefix(5))")
  }
}

/// Recurring schedules across worker processes: every worker ticks, each tick is appended once.
@Suite("Recurring schedules across worker processes", .timeLimit(.minutes(5)))
struct FleetScheduleTests {
  @Test("3 workers tick a schedule every second: each tick appended once, in tick order")
  func ticksOnceAcrossWorkers() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.createFleetTables()
    let outbox = try await database.outbox(of: FleetMessage.self) { $0.key }
    // The schedule's key stays paused, so its messages stay in the table to be read.
    try await outbox.pause(partition: "sched")
    try await outbox.schedules.set(
      OutboxSchedule(
        "every-second",
        .every(.seconds(1)),
        partition: "sched",
        message: FleetMessage(key: "sched", n: 0)
      )
    )
    let fleet = Fleet(database, lease: 5000, poll: 100, limit: 4)
    for _ in 0..<3 { try await fleet.start() }
    #expect(
      await eventually(upTo: .seconds(120), every: .milliseconds(100)) {
        try await database.fleetCount(
          "SELECT count(*)::bigint FROM orderly_outbox_message WHERE partition = 'sched'"
        ) >= 8
      }
    )
    try await outbox.schedules.pause(named: "every-second")
    await fleet.terminateAll()
    let ticks = try await database.fleetValues(
      """
      SELECT (headers::jsonb ->> 'orderly-tick') FROM orderly_outbox_message
      WHERE partition = 'sched' ORDER BY sequence
      """,
      as: String.self
    )
    #expect(ticks.count >= 8)
    // Each tick once, and in tick order: the numbers the line gave them follow the ticks.
    #expect(Set(ticks).count == ticks.count, "\(ticks)")
    #expect(ticks == ticks.sorted(), "\(ticks)")
    let listed = try await outbox.schedules.list()
    let lastTick = listed.first?.lastTick.map(OutboxScheduleTickText.iso)
    #expect(lastTick == ticks.last)
    await outbox.close()
  }
}

@Suite("Fair shares across worker processes", .timeLimit(.minutes(5)))
struct FleetFairShareTests {
  @Test("3 workers share their slots by weight: 4 keys get half beside 200, each key in order")
  func sharesAcrossWorkers() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.createFleetTables()
    let outbox = try await database.outbox(of: FleetMessage.self) { $0.key }
    // 200 keys of 6 messages, 4 keys of 300: 1,200 messages in each group, appended before
    // any worker starts.
    var messages: [FleetMessage] = []
    for n in 1...6 { for key in 0..<200 { messages.append(FleetMessage(key: "big:\(key)", n: n)) } }
    for n in 1...300 {
      for key in 0..<4 { messages.append(FleetMessage(key: "small:\(key)", n: n)) }
    }
    for start in stride(from: 0, to: messages.count, by: 500) {
      try await outbox.append(contentsOf: Array(messages[start..<min(start + 500, messages.count)]))
    }
    // 3 workers of 2 slots: 6 slots, of which the 4 small keys can fill 4.
    let fleet = Fleet(
      database,
      lease: 5000,
      poll: 100,
      limit: 2,
      environment: ["ORDERLY_PROBE_FAIR_SHARES": "big:=1,small:=1"]
    )
    for _ in 0..<3 { try await fleet.start() }
    #expect(
      await eventually(upTo: .seconds(180), every: .milliseconds(200)) {
        try await database.fleetCount("SELECT count(*)::bigint FROM fleet_delivery") >= 2_400
      }
    )
    await fleet.terminateAll()
    let deliveries = try await database.deliveries()
    let distinct = Set(deliveries.map { "\($0.key)#\($0.n)" }).count
    #expect(distinct == 2_400)
    for (key, line) in byKey(deliveries) {
      let wrong = problem(in: line, last: key.hasPrefix("small:") ? 300 : 6)
      #expect(wrong == nil, "\(wrong ?? "")")
    }
    // The first 1,600 deliveries begun: half each at equal weights (800), with both groups
    // still waiting throughout (1,200 each).
    let early = deliveries.sorted { $0.started < $1.started }.prefix(1_600)
    let small = Double(early.count { $0.key.hasPrefix("small:") }) / Double(early.count)
    #expect(small >= 0.4 && small <= 0.6, "the small group's share of the first 1,600: \(small)")
    await outbox.close()
  }
}

@Suite("Rate limits across worker processes", .timeLimit(.minutes(5)))
struct FleetRateLimitTests {
  @Test(
    "3 workers under one limit for a tenant's keys begin at most 20 a second together, each key in order"
  )
  func limitAcrossWorkers() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.createFleetTables()
    let outbox = try await database.outbox(of: FleetMessage.self) { $0.key }
    // 30 keys of the tenant t:, 4 messages each: 120 deliveries, 6 seconds at the limit.
    var messages: [FleetMessage] = []
    for n in 1...4 { for key in 0..<30 { messages.append(FleetMessage(key: "t:\(key)", n: n)) } }
    try await outbox.append(contentsOf: messages)
    let fleet = Fleet(
      database,
      lease: 5000,
      poll: 100,
      limit: 4,
      environment: ["ORDERLY_PROBE_RATE_LIMIT": "20/1000/t:"]
    )
    for _ in 0..<3 { try await fleet.start() }
    #expect(
      await eventually(upTo: .seconds(120), every: .milliseconds(200)) {
        try await database.fleetCount("SELECT count(*)::bigint FROM fleet_delivery") >= 120
      }
    )
    await fleet.terminateAll()
    let deliveries = try await database.deliveries()
    let distinct = Set(deliveries.map { "\($0.key)#\($0.n)" }).count
    #expect(distinct == 120)
    for (key, line) in byKey(deliveries) {
      let wrong = problem(in: line, last: 4)
      #expect(wrong == nil, "\(key): \(wrong ?? "")")
    }
    // Windows are whole seconds on the server's clock, this machine's here: no second of the
    // workers' clock saw more than 20 begin, whichever worker began them.
    let perSecond = Dictionary(grouping: deliveries) { Int($0.started.timeIntervalSince1970) }
    let busiest = perSecond.values.map(\.count).max() ?? 0
    #expect(busiest <= 20, "the busiest second began \(busiest)")
    // And the limit held the run back: 120 deliveries need at least 6 windows.
    #expect(perSecond.count >= 6, "\(perSecond.count) seconds")
    let workers = Set(deliveries.map(\.worker)).count
    #expect(workers >= 2, "\(workers) workers delivered")
    await outbox.close()
  }
}

/// A tick as its message's `orderly-tick` header writes it.
enum OutboxScheduleTickText {
  static func iso(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: date)
  }
}

extension TestDatabase {
  /// The app's counter per key: the last number each key's messages carry.
  func counters() async throws -> [String: Int] {
    var counters: [String: Int] = [:]
    try await admin.withConnection { connection in
      try await connection.query(
        PostgresQuery(unsafeSQL: "SET search_path TO \(self.schema)"),
        logger: TestServer.logger
      )
      for try await (key, n) in try await connection.query(
        "SELECT key, n FROM fleet_counter",
        logger: TestServer.logger
      ).decode((String, Int).self) {
        counters[key] = n
      }
    }
    return counters
  }
}
#endif
