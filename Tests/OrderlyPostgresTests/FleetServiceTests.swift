// Built with the Postgres and Server traits; see Package.swift.
#if Postgres && Server
import BuiltProducts
import Foundation
import OrderlyPostgres
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite(
  "A PostgreSQL worker as a service: SIGTERM hands its lines over at once",
  .serialized,
  .timeLimit(.minutes(3))
)
struct FleetServiceTests {
  @Test(
    "SIGTERM: the deliveries in flight finish within the grace period, and another worker takes each line long before the lease ends"
  )
  func sigtermHandsOver() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let folder = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-fleet-service-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let gate = folder.appendingPathComponent("gate").path
    let keys = (0..<5).map { "key-\($0)" }
    let writer = try await database.outbox(of: String.self)
    for key in keys {
      try await writer.append(contentsOf: ["slow-\(key)", "after-\(key)"], partition: key)
    }
    // Worker A: a process running its delivery as an OutboxService in a ServiceGroup, with a
    // lease of two minutes: without the hand-over, its lines would wait that long.
    let worker = try BuiltProducts.Running(
      "outbox-service-probe",
      arguments: ["pgserve", database.url, database.schema, gate, "60000", "120000", "200"]
    )
    let begun = await worker.readLines(keys.count)
    let begunMessages = Set(begun.map { $0.split(separator: " ").prefix(2).joined(separator: " ") })
    let expectedBegun = Set(keys.map { "begin slow-\($0)" })
    #expect(begunMessages == expectedBegun)
    // Worker B, in this process: it finds every line held.
    let other = try await database.outbox(of: String.self)
    let seen = Recorder<String>()
    try other.start(lease: .seconds(120), pollInterval: .milliseconds(200)) { envelope in
      seen.record(envelope.message)
    }
    worker.send(SIGTERM)
    // Once the service says so, no new message is taken; only then do the receivers answer.
    let log = await worker.readErrors(until: "no new messages taken")
    #expect(log.contains("no new messages taken"))
    #expect(FileManager.default.createFile(atPath: gate, contents: nil))
    let result = await worker.finish()
    let exited = ContinuousClock.now
    #expect(result.status == 0, "stderr: \(result.stderr)")
    let ends = result.stdout.split(separator: "\n").map(String.init)
    let expectedEnds = Set(keys.map { "end slow-\($0)" })
    #expect(Set(ends.dropLast()) == expectedEnds)
    #expect(ends.last == "exited")
    // B delivers each line's next message: the lines were released, not left to their leases.
    let handedOver = await seen.wait(upTo: .seconds(60)) { $0.count >= keys.count }
    let took = ContinuousClock.now - exited
    await other.stop()
    #expect(handedOver, "seen: \(seen.all)")
    let expectedSeen = Set(keys.map { "after-\($0)" })
    #expect(Set(seen.all) == expectedSeen, "acknowledged before the stop")
    // Far below the two-minute lease (a busy machine may take seconds, never the lease).
    #expect(took < .seconds(60), "took \(took)")
    #expect(try await writer.pendingCount() == 0)
  }
}
#endif
