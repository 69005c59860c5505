import Foundation
import Testing

@Suite("fleet-outbox", .timeLimit(.minutes(3)))
struct FleetOutboxTests {
  @Test(
    "A is killed and its keys wait for the lease; B gets SIGTERM and its key moves at once; every key in order, each change once"
  )
  func story() throws {
    let (status, text) = try runExample(environment: ProcessInfo.processInfo.environment)
    try checkStory(status: status, text: text)
  }

  @Test(
    "with no server running and no ORDERLY_POSTGRES_URL, the example starts a cluster, tells the story, stops the cluster and exits"
  )
  func startsItsOwnServer() throws {
    // A state folder of its own: the cluster every other test uses is neither found nor touched.
    let state = FileManager.default.temporaryDirectory
      .appendingPathComponent("fleet-outbox-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: state) }
    var environment = ProcessInfo.processInfo.environment
    environment["ORDERLY_POSTGRES_URL"] = nil
    environment["ORDERLY_POSTGRES_STATE"] = state.path
    let (status, text) = try runExample(environment: environment)
    try checkStory(status: status, text: text)
    // The cluster it started is stopped: the script's record of it is gone.
    let left = try FileManager.default.contentsOfDirectory(atPath: state.path)
    #expect(!left.contains("url"), "\(left)")
  }

  /// Runs the built example from the repository's folder, as lesson 19 does, and reads what it
  /// prints to its end.
  private func runExample(environment: [String: String]) throws -> (Int32, String) {
    let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
      .appendingPathComponent("fleet-outbox")
    let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    let process = Process()
    process.executableURL = binary
    process.currentDirectoryURL = repository
    process.environment = environment
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
  }

  private func checkStory(status: Int32, text: String) throws {
    #expect(status == 0, "\(text)")
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
    // The audit of the run's own trail: the 18 deliveries that ended (the two A was killed in
    // left no row), nothing wrong.
    #expect(
      text.contains(
        "18 attempts over 3 keys, 18 delivered, 18 numbers checked for loss: nothing lost"
      ),
      "\(text)"
    )
    // The late write under A's fence, refused by the receiver's fence table.
    #expect(
      text.contains("refused: the write for key 'alice' under fence 1 was refused: fence 2"),
      "\(text)"
    )
  }
}
