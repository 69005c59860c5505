import Foundation
import Testing

@Suite("fleet-outbox", .timeLimit(.minutes(3)))
struct FleetOutboxTests {
  @Test("A is killed mid-delivery; B and C carry every key on, in order, each change applied once")
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
    #expect(text.contains("21 deliveries began"), "\(text)")
    #expect(text.contains("Every key in order."), "\(text)")
    for key in ["alice: #1 #2 #3 by A", "bob: #7 #8 #9 by A", "carol: #13 #14 #15 by A"] {
      #expect(text.contains(key), "\(text)")
    }
    #expect(text.contains("then #4 #5 #6 by the worker that took it over (fence 2)"), "\(text)")
    for (row, key, first, last) in [(1, "alice", 4, 6), (2, "bob", 10, 12), (3, "carol", 16, 18)] {
      #expect(
        text.contains(
          "delivering \(row) \(key): the next holder takes the key (fence 2) and begins #\(first) again"
        ),
        "\(text)"
      )
      #expect(
        text.contains("delivered \(row) \(key): #\(first) #\(first + 1) #\(last), in order"),
        "\(text)"
      )
    }
    // B and C split the three keys between them, however they do it.
    let split = try #require(text.firstMatch(of: /Keys taken over: B (\d), C (\d) \(of 3\)\./))
    #expect((Int(split.1) ?? 0) + (Int(split.2) ?? 0) == 3, "\(text)")
  }
}
