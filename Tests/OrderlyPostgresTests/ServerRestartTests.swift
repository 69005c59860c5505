// Built with the Postgres trait only, on Linux (posix_spawn from Glibc); see Package.swift.
#if Postgres && canImport(Glibc)
import Foundation
import Glibc
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Testing

/// The PostgreSQL server itself stopped and started again (not a relay cut): a cluster of the
/// test's own, from `Tools/postgres/cluster.sh`, so the server every other test uses stays up.
@Suite("PostgresOutbox when its server is stopped and started again", .timeLimit(.minutes(4)))
struct ServerRestartTests {
  @Test(
    "the server restarts while two workers deliver: they reconnect and go on without a restart of their own; nothing accepted is lost, each key in order"
  )
  func restartWhileDelivering() async throws {
    // The suite needs what the other PostgreSQL tests need (a server can be started here).
    guard TestServer.available() != nil else { return }
    let cluster = try OwnCluster.start()
    defer { cluster.stop() }
    let database = try await TestDatabase.make(onServerAt: cluster.url)
    defer { Task { await database.drop() } }

    let keys = (0..<12).map { "key-\($0)" }
    let perKey = 20
    let writer = try await database.outbox(of: String.self)
    let seen = Recorder<(worker: Int, message: String)>()
    let workers = [
      try await database.outbox(of: String.self, client: database.client()),
      try await database.outbox(of: String.self, client: database.client()),
    ]
    // One delivery is under way when the server stops: it returns only once the server is down.
    let inDelivery = AsyncGate()
    let serverDown = AsyncGate()
    for (number, worker) in workers.enumerated() {
      try worker.start(limit: 3, lease: .seconds(2), pollInterval: .milliseconds(100)) {
        envelope in
        seen.record((number, envelope.message))
        if envelope.message == "key-0:5" && envelope.attempt == 1 {
          await inDelivery.open()
          await serverDown.wait()
        }
      }
    }

    // The first half of each key, delivered in part before the server stops.
    for key in keys {
      try await writer.append(contentsOf: (0..<perKey / 2).map { "\(key):\($0)" }, partition: key)
    }
    await inDelivery.wait()

    try cluster.down()
    await serverDown.open()
    // Appended while the server is down: waits for it and is stored, or is refused with
    // cannotOpen (then appended again once the server is back); never lost once accepted.
    let late = Task { () -> Bool in
      do {
        try await writer.append("key-0:late", partition: "key-0")
        return true
      } catch OutboxError.cannotOpen {
        return false
      }
    }
    try cluster.up()
    if try await late.value == false {
      try await writer.append("key-0:late", partition: "key-0")
    }
    let afterRestart = seen.all.count
    // The second half, appended after the restart.
    for key in keys {
      try await writer.append(
        contentsOf: (perKey / 2..<perKey).map { "\(key):\($0)" },
        partition: key
      )
    }

    let total = keys.count * perKey + 1
    let allSeen = await seen.wait(upTo: .seconds(120)) { records in
      Set(records.map(\.message)).count >= total
    }
    #expect(allSeen, "delivered \(Set(seen.all.map(\.message)).count) of \(total)")
    #expect(await eventually(upTo: .seconds(60)) { try await writer.pendingCount() == 0 })
    for worker in workers { await worker.stop() }

    // Per key, at least once and in order: a delivery cut by the restart may come twice in a
    // row, but no message is missing or out of its key's order.
    let records = seen.all
    for key in keys {
      var distinct: [String] = []
      for record in records where record.message.hasPrefix("\(key):") {
        if distinct.last != record.message { distinct.append(record.message) }
      }
      var expected = (0..<perKey / 2).map { "\(key):\($0)" }
      if key == "key-0" { expected.append("key-0:late") }
      expected += (perKey / 2..<perKey).map { "\(key):\($0)" }
      #expect(distinct == expected, "\(key): \(distinct)")
    }
    // Both workers delivered after the restart, in the same process, never started again.
    let deliveredAfter = Set(records.dropFirst(afterRestart).map(\.worker))
    #expect(deliveredAfter == [0, 1], "delivered after the restart: workers \(deliveredAfter)")
  }
}

/// A throwaway PostgreSQL cluster of one test's own, through `Tools/postgres/cluster.sh` with a
/// state folder of its own: started, stopped with its data kept (`down`), started again (`up`),
/// deleted (`stop`).
struct OwnCluster {
  let url: String
  private let state: URL

  static func start() throws -> OwnCluster {
    let state = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-cluster-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
    let url = try run("start", state: state).trimmingCharacters(in: .whitespacesAndNewlines)
    guard url.hasPrefix("postgres://") else {
      throw ClusterError(description: "cluster.sh start printed no URL: \(url)")
    }
    return OwnCluster(url: url, state: state)
  }

  /// Stops the server (`pg_ctl stop -m fast`): every connection ends, new ones are refused.
  func down() throws { _ = try Self.run("down", state: state) }

  /// Starts the stopped server again, on the same port, with the same data.
  func up() throws { _ = try Self.run("up", state: state) }

  /// Stops the server and deletes its data.
  func stop() {
    _ = try? Self.run("stop", state: state)
    try? FileManager.default.removeItem(at: state)
  }

  /// Runs `cluster.sh COMMAND` and returns what it printed; throws with its errors if it failed.
  ///
  /// `posix_spawn` and `waitpid`, not `Process`: the server that `pg_ctl start` leaves behind
  /// keeps running after the script, and the script's end is all that is waited for.
  private static func run(_ command: String, state: URL) throws -> String {
    let root = URL(fileURLWithPath: #filePath)
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let script = root.appendingPathComponent("Tools/postgres/cluster.sh").path
    let output = state.appendingPathComponent("\(command).out").path
    let errors = state.appendingPathComponent("\(command).err").path
    let line =
      "ORDERLY_POSTGRES_STATE='\(state.path)' bash '\(script)' \(command)"
      + " >'\(output)' 2>'\(errors)' </dev/null"
    var pid: pid_t = 0
    let arguments = ["/bin/sh", "-c", line]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    let spawned = posix_spawn(&pid, "/bin/sh", nil, nil, &argv, environ)
    guard spawned == 0 else {
      throw ClusterError(description: "could not run cluster.sh \(command): error \(spawned)")
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    // Exited normally with status 0 (WIFEXITED and WEXITSTATUS, spelt out).
    guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
      let said = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
      throw ClusterError(description: "cluster.sh \(command) failed (status \(status)): \(said)")
    }
    return printed
  }
}

struct ClusterError: Error, CustomStringConvertible {
  let description: String
}
#endif
