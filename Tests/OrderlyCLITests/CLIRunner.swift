import Foundation
import Testing

/// What a run of the `orderly` binary printed and how it ended.
struct CLIResult {
  let status: Int32
  let stdout: String
  let stderr: String
}

/// The built `orderly` binary, next to the test bundle.
let orderlyBinary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  .appendingPathComponent("orderly")

/// Runs the built `orderly` binary, which `swift test` builds first because this target depends
/// on it, with `input` on standard input.
func orderly(
  _ arguments: [String],
  input: Data = Data(),
  environment: [String: String] = [:]
) async throws -> CLIResult {
  let process = Process()
  process.executableURL = orderlyBinary
  process.arguments = arguments
  var merged = ProcessInfo.processInfo.environment
  merged["NO_COLOR"] = nil
  for (key, value) in environment { merged[key] = value }
  process.environment = merged
  let stdin = Pipe()
  let stdout = Pipe()
  let stderr = Pipe()
  process.standardInput = stdin
  process.standardOutput = stdout
  process.standardError = stderr
  try process.run()
  stdin.fileHandleForWriting.write(input)
  try stdin.fileHandleForWriting.close()
  // Read both pipes to the end before waiting, so a full pipe cannot stall the child.
  let errors = Task.detached { stderr.fileHandleForReading.readDataToEndOfFile() }
  let output = stdout.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let errorData = await errors.value
  return CLIResult(
    status: process.terminationStatus,
    stdout: String(decoding: output, as: UTF8.self),
    stderr: String(decoding: errorData, as: UTF8.self)
  )
}

/// Runs the shell on `script`, standard output and standard error in one pipe, so answers and
/// errors can be checked in the order they were printed.
func shell(_ script: Data, arguments: [String] = ["--in-memory"]) throws -> (Int32, [String]) {
  let process = Process()
  process.executableURL = orderlyBinary
  process.arguments = ["shell"] + arguments
  let stdin = Pipe()
  let output = Pipe()
  process.standardInput = stdin
  process.standardOutput = output
  process.standardError = output
  try process.run()
  stdin.fileHandleForWriting.write(script)
  try stdin.fileHandleForWriting.close()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
  return (process.terminationStatus, lines)
}

func shell(_ script: String, arguments: [String] = ["--in-memory"]) throws -> (Int32, [String]) {
  try shell(Data(script.utf8), arguments: arguments)
}
