import BuiltProducts
import Foundation

/// What a run of the `orderly` binary printed and how it ended.
typealias CLIResult = BuiltProducts.Result

/// The built `orderly` binary.
let orderlyBinary = BuiltProducts.url(of: "orderly")

/// Runs the built `orderly` binary, which `swift test` builds first because this target depends
/// on it, with `input` on standard input.
///
/// - Parameters:
///   - arguments: The command's arguments.
///   - input: What to write to its standard input.
///   - environment: Variables to set; an empty value clears one.
/// - Returns: What it printed and how it ended.
/// - Throws: If the binary is not built or cannot be started.
func orderly(
  _ arguments: [String],
  input: Data = Data(),
  environment: [String: String] = [:]
) async throws -> CLIResult {
  try await BuiltProducts.run(
    "orderly",
    arguments: arguments,
    input: input,
    environment: environment
  )
}

/// Runs the shell on `script`, standard output and standard error in one pipe, so answers and
/// errors can be checked in the order they were printed.
func shell(_ script: Data, arguments: [String] = ["--in-memory"]) async throws -> (
  Int32, [String]
) {
  let result = try await BuiltProducts.run(
    "orderly",
    arguments: ["shell"] + arguments,
    input: script,
    mergingErrors: true
  )
  return (result.status, result.stdout.split(separator: "\n").map(String.init))
}

func shell(_ script: String, arguments: [String] = ["--in-memory"]) async throws -> (
  Int32, [String]
) {
  try await shell(Data(script.utf8), arguments: arguments)
}
