import ArgumentParser
import Foundation
import OrderlyOperator

/// `orderly`: the demo of the notes screen's ordering problem, and an interactive notes shell.
@main
struct OrderlyCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "orderly",
    abstract: "Put asynchronous work in order: a demo, and a notes shell to try it by hand.",
    version: "0.1.0",
    subcommands: [DemoCommand.self, ShellCommand.self, ExamplesCommand.self, OutboxCommand.self]
  )
}

/// A runtime failure: printed as one line on standard error, then exit status 1.
struct RuntimeFailure: Error {
  let message: String
}

extension AsyncParsableCommand {
  /// Prints `orderly: MESSAGE` on standard error and returns the exit code for a runtime failure.
  func fail(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data("orderly: \(message)\n".utf8))
    return ExitCode.failure
  }
}

/// A latency range typed as `MIN-MAX` in milliseconds, such as `20-150`.
struct LatencyRange: ExpressibleByArgument, Sendable, CustomStringConvertible {
  let minimum: Int
  let maximum: Int

  init(minimum: Int, maximum: Int) {
    self.minimum = minimum
    self.maximum = maximum
  }

  init?(argument: String) {
    let parts = argument.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 2, let low = Int(parts[0]), let high = Int(parts[1]), low >= 0,
      high >= low, high <= 60_000
    else { return nil }
    self.init(minimum: low, maximum: high)
  }

  var range: ClosedRange<Duration> { .milliseconds(minimum) ... .milliseconds(maximum) }

  var description: String { "\(minimum)-\(maximum)" }
}

/// Whether standard output is a terminal that should get colour (never when `NO_COLOR` is set).
func colourEnabled() -> Bool {
  if let noColor = ProcessInfo.processInfo.environment["NO_COLOR"], !noColor.isEmpty {
    return false
  }
  return isatty(STDOUT_FILENO) == 1
}
