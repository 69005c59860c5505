import Foundation
import Testing

@Suite("fleet-outbox", .timeLimit(.minutes(3)))
struct FleetOutboxTests {
  @Test(
    "A is killed and its keys wait for the lease; B gets SIGTERM and its key moves at once; every key in order, each change once"
  )
  func story() throws {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
      .appendingPathComponent("fleet-outbox")
    let process = Process()
    process.executableURL = binary
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(text)")
    #expect(text.contains("18 of 18 changes applied, each once"), "\(text)")
    // 18 changes, and the two A was killed in begun again; B's was finished, not begun again.
    #expect(text.contains("20 deliveries began"), "\(text)")
    #expect(text.contains("Every key in order."), "\(text)")
    #expect(text.contains("B finished #16 and exited"), "\(text)")
    for line in [
      "alice: #1 #2 #3 by A (fence 1), then #4 #5 #6 by C (fence 2)",
      "bob: #7 #8 #9 by A (fence 1), then #10 #11 #12 by C (fence 2)",
      "carol: #13 #14 #15 #16 by B (fence 1), then #17 #18 by C (fence 2)",
    ] {
      #expect(text.contains(line), "\(text)")
    }
    // carol moved before A's leases ran out: the verdict says so only when it did.
    #expect(
      text.contains("Verdict: the key of the worker stopped with SIGTERM moved at once"),
      "\(text)"
    )
    let moved = try #require(
      text.firstMatch(
        of: /carol moved to C (\d+) ms after B's SIGTERM; alice and bob (\d+) ms and (\d+) ms/
      )
    )
    let carol = Int(moved.1) ?? .max
    let alice = Int(moved.2) ?? 0
    let bob = Int(moved.3) ?? 0
    #expect(carol < alice && carol < bob, "\(text)")
    // A's keys waited for the lease: what was left of it, at least a quarter of its 3 seconds.
    #expect(alice >= 500 && bob >= 500, "\(text)")
    // The picture's rows: who held each key, in time order.
    for line in [
      "took 1 alice: A, fence 1", "killed 1 alice:", "took 1 alice: C, fence 2",
      "took 3 carol: B, fence 1", "released 3 carol:", "took 3 carol: C, fence 2",
    ] {
      #expect(text.contains(line), "\(text)")
    }
  }
}
