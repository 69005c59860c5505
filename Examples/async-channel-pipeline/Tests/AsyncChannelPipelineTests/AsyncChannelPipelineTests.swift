import Foundation
import Testing

/// Runs the example's binary, built beside this test bundle, and returns what it printed.
func runPipeline() throws -> String {
  let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("async-channel-pipeline")
  let process = Process()
  process.executableURL = binary
  let output = Pipe()
  process.standardOutput = output
  try process.run()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  #expect(process.terminationStatus == 0)
  return String(decoding: data, as: UTF8.self)
}

@Suite("async-channel-pipeline")
struct AsyncChannelPipelineTests {
  @Test("both pipelines save in order; the cancelled file is skipped")
  func pipelines() throws {
    let output = try runPipeline()
    let all = "saved in order: 0.jpg 1.jpg 2.jpg 3.jpg 4.jpg 5.jpg 6.jpg 7.jpg"
    #expect(output.contains("AsyncChannel + for await (the “run serially” answer):\n  \(all)"))
    #expect(
      output.contains("SerialQueue:\n  saved in order: 0.jpg 1.jpg 2.jpg 3.jpg 4.jpg 6.jpg 7.jpg")
    )
    #expect(output.contains("files on disk: 7"))
  }
}
