public import Foundation

/// The package's built executables (`orderly`, the examples, the test probes), found the same
/// way on Linux and macOS, and run from one place.
///
/// `swift test` builds them first, because the test targets depend on them; they sit in the
/// build's bin folder, next to the test bundle. The folder is found once per run:
/// 1. `ORDERLY_BIN_PATH`, if set;
/// 2. the folder holding the `.xctest` bundle: on Linux the test process *is* that bundle, on
///    macOS it is loaded into `xctest` or `swiftpm-testing-helper` and listed in
///    `Bundle.allBundles`;
/// 3. failing both, `swift build --show-bin-path` in the package.
public enum BuiltProducts {
  /// What a run of a product printed, and how it ended.
  public struct Result: Sendable {
    /// The exit status (or the signal's number, when `reason` is `.uncaughtSignal`).
    public let status: Int32
    /// Why the process ended.
    public let reason: Process.TerminationReason
    /// Standard output, as UTF-8.
    public let stdout: String
    /// Standard error, as UTF-8; empty when `mergingErrors` put it in `stdout`.
    public let stderr: String
  }

  /// The build's bin folder.
  public static let folder: URL = locate()

  /// The executable named `name` in the bin folder.
  ///
  /// - Parameter name: The product's name, such as `orderly` or `serial-queue`.
  /// - Returns: Its path.
  public static func url(of name: String) -> URL {
    folder.appendingPathComponent(name)
  }

  /// Runs a product to its end with `input` on standard input.
  ///
  /// Both pipes are read to their end before waiting, so a full pipe cannot stall the child.
  ///
  /// - Parameters:
  ///   - name: The product's name.
  ///   - arguments: Its arguments.
  ///   - input: What to write to its standard input, which is then closed.
  ///   - environment: Variables to set (or, with an empty value, to clear) on top of this
  ///     process's environment; `NO_COLOR` is always cleared.
  ///   - mergingErrors: Whether standard error goes to the standard output pipe, so that
  ///     answers and errors can be read in the order they were printed.
  /// - Returns: What it printed and how it ended.
  /// - Throws: If the product is not built or cannot be started.
  @available(*, noasync, message: "it blocks its thread until the product ends; use the async run")
  public static func run(
    _ name: String,
    arguments: [String] = [],
    input: Data = Data(),
    environment: [String: String] = [:],
    mergingErrors: Bool = false
  ) throws -> Result {
    try runBlocking(name, arguments, input, environment, mergingErrors)
  }

  /// Runs a product to its end with `input` on standard input, waiting on a thread of its own.
  ///
  /// Waiting for a child process is a blocking read: done on a cooperative thread, it takes
  /// one of the pool's few threads (two on a two-core machine) for as long as the child runs,
  /// and every task of the test process waits meanwhile. The stall watchdog caught exactly that:
  /// both cooperative threads blocked in this call, and every queue of the parallel tests
  /// around them stalled for seconds.
  ///
  /// - Parameters:
  ///   - name: The product's name.
  ///   - arguments: Its arguments.
  ///   - input: What to write to its standard input, which is then closed.
  ///   - environment: Variables to set (or, with an empty value, to clear).
  ///   - mergingErrors: Whether standard error goes to the standard output pipe.
  /// - Returns: What it printed and how it ended.
  /// - Throws: If the product is not built or cannot be started.
  public static func run(
    _ name: String,
    arguments: [String] = [],
    input: Data = Data(),
    environment: [String: String] = [:],
    mergingErrors: Bool = false
  ) async throws -> Result {
    try await offThePool { try runBlocking(name, arguments, input, environment, mergingErrors) }
  }

  private static func runBlocking(
    _ name: String,
    _ arguments: [String],
    _ input: Data,
    _ environment: [String: String],
    _ mergingErrors: Bool
  ) throws -> Result {
    try Running(
      name,
      arguments: arguments,
      environment: environment,
      mergingErrors: mergingErrors,
      input: input
    ).finishBlocking()
  }

  /// Makes writing to a pipe whose reader has exited an error, not a `SIGPIPE` that kills the
  /// whole test process: a child that exits before reading all of its input (a usage error, a
  /// refused file) closes its end while a writer thread still writes.
  static func ignoreBrokenPipes() {
    _ = brokenPipesIgnored
  }

  private static let brokenPipesIgnored: Void = {
    signal(SIGPIPE, SIG_IGN)
  }()

  /// A product that is not built.
  public struct NotBuilt: Error, CustomStringConvertible {
    /// Where it was looked for.
    public let path: String
    /// What to do.
    public var description: String { "no built product at \(path); run `swift build` first" }
  }

  private static func locate() -> URL {
    if let path = ProcessInfo.processInfo.environment["ORDERLY_BIN_PATH"], !path.isEmpty {
      return URL(fileURLWithPath: path)
    }
    let candidates =
      Bundle.allBundles.map(\.bundlePath) + [CommandLine.arguments.first ?? ""]
    for path in candidates where path.hasSuffix(".xctest") {
      return URL(fileURLWithPath: path).deletingLastPathComponent()
    }
    return binPathFromSwiftBuild()
  }

  /// `swift build --show-bin-path`, run in the package that holds this file.
  private static func binPathFromSwiftBuild() -> URL {
    let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["swift", "build", "--show-bin-path"]
    process.currentDirectoryURL = package
    let pipe = Pipe()
    process.standardOutput = pipe
    do {
      try process.run()
    } catch {
      return package.appendingPathComponent(".build/debug")
    }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return URL(
      fileURLWithPath: path.isEmpty ? package.appendingPathComponent(".build/debug").path : path
    )
  }
}

/// Reads a pipe to its end on a thread of its own.
private final class ErrorsReader: @unchecked Sendable {
  // Written once by the reading thread before `done` is signalled, read only after waiting on
  // `done`: the semaphore orders the two.
  private var data = Data()
  private let done = DispatchSemaphore(value: 0)
  private let hasPipe: Bool

  init(_ pipe: Pipe?) {
    hasPipe = pipe != nil
    guard let pipe else { return }
    let thread = Thread { [self] in
      data = pipe.fileHandleForReading.readDataToEndOfFile()
      done.signal()
    }
    thread.start()
  }

  func finish() -> Data {
    guard hasPipe else { return Data() }
    done.wait()
    return data
  }
}

extension BuiltProducts {
  /// A product started with its standard input open, so a test can type, read as it goes,
  /// send signals, and then collect the rest.
  public final class Running: @unchecked Sendable {
    // @unchecked Sendable, proved here: every stored property is a `let` set in `init`; the
    // pipes' file handles and the process may be used from any thread, and each method only
    // reads or writes its pipe. Tests hand a Running to a thread of their own (`offThePool`) to
    // wait on it there.
    /// The process.
    public let process = Process()
    private let stdin: Pipe
    private let output: Pipe
    private let errors: Pipe
    private let mergingErrors: Bool
    /// Whether a writer thread owns standard input (given all at once), and closes it.
    private let inputGivenAtStart: Bool

    /// Starts a built product.
    ///
    /// - Parameters:
    ///   - name: The product's name.
    ///   - arguments: Its arguments.
    ///   - environment: Variables to set (or, with an empty value, to clear) on top of this
    ///     process's environment; `NO_COLOR` is always cleared.
    ///   - mergingErrors: Whether standard error goes to the standard output pipe.
    ///   - input: All of standard input at once, written on a thread of its own and then
    ///     closed; `nil` to type it with ``type(_:)``.
    /// - Throws: If the product is not built or cannot be started.
    public init(
      _ name: String,
      arguments: [String] = [],
      environment: [String: String] = [:],
      mergingErrors: Bool = false,
      input: Data? = nil
    ) throws {
      BuiltProducts.ignoreBrokenPipes()
      let binary = BuiltProducts.url(of: name)
      guard FileManager.default.isExecutableFile(atPath: binary.path) else {
        throw NotBuilt(path: binary.path)
      }
      self.mergingErrors = mergingErrors
      inputGivenAtStart = input != nil
      process.executableURL = binary
      process.arguments = arguments
      var merged = ProcessInfo.processInfo.environment
      merged["NO_COLOR"] = nil
      for (key, value) in environment { merged[key] = value.isEmpty ? nil : value }
      process.environment = merged
      // Pipes made and the product started under one lock, each pipe closed on exec: a product
      // started by another test at the same moment must not inherit this one's pipes. A child
      // that holds another's standard output open keeps that reader from ever seeing its end:
      // two tests' products then wait on each other (seen: three probes and four tests stuck
      // for 35 minutes).
      BuiltProducts.spawning.lock()
      defer { BuiltProducts.spawning.unlock() }
      (stdin, output, errors) = (Pipe(), Pipe(), Pipe())
      for pipe in [stdin, output, errors] {
        _ = fcntl(pipe.fileHandleForReading.fileDescriptor, F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, F_SETFD, FD_CLOEXEC)
      }
      process.standardInput = stdin
      process.standardOutput = output
      process.standardError = mergingErrors ? output : errors
      try process.run()
      if let input {
        // Written on a thread of its own: a child that answers before it has read all of its
        // input must not stall on a full pipe.
        let stdin = stdin
        let writer = Thread {
          // A child that exits before reading all of it closes the pipe: not an error here.
          try? stdin.fileHandleForWriting.write(contentsOf: input)
          try? stdin.fileHandleForWriting.close()
        }
        writer.start()
      }
    }

    /// Writes `text` to the product's standard input.
    ///
    /// - Parameter text: What to type.
    public func type(_ text: String) {
      try? stdin.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    /// Reads standard output until it holds `count` lines (or ends).
    ///
    /// - Parameter count: How many lines to wait for.
    /// - Returns: The lines read.
    @available(*, noasync, message: "it blocks its thread; use the async readLines")
    public func readLines(_ count: Int) -> [String] {
      readLinesBlocking(count)
    }

    /// Reads standard output until it holds `count` lines (or ends), on a thread of its own.
    ///
    /// - Parameter count: How many lines to wait for.
    /// - Returns: The lines read.
    public func readLines(_ count: Int) async -> [String] {
      await BuiltProducts.offThePool { self.readLinesBlocking(count) }
    }

    private func readLinesBlocking(_ count: Int) -> [String] {
      var received = Data()
      while received.filter({ $0 == UInt8(ascii: "\n") }).count < count {
        let chunk = output.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        received.append(chunk)
      }
      return String(decoding: received, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Reads standard error until it contains `text` (or ends).
    ///
    /// - Parameter text: What to wait for.
    /// - Returns: What was read.
    @available(*, noasync, message: "it blocks its thread; use the async readErrors")
    public func readErrors(until text: String) -> String {
      readErrorsBlocking(until: text)
    }

    /// Reads standard error until it contains `text` (or ends), on a thread of its own.
    ///
    /// - Parameter text: What to wait for.
    /// - Returns: What was read.
    public func readErrors(until text: String) async -> String {
      await BuiltProducts.offThePool { self.readErrorsBlocking(until: text) }
    }

    private func readErrorsBlocking(until text: String) -> String {
      var received = Data()
      while !String(decoding: received, as: UTF8.self).contains(text) {
        let chunk = errors.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        received.append(chunk)
      }
      return String(decoding: received, as: UTF8.self)
    }

    /// Sends a signal to the product.
    ///
    /// - Parameter signal: The signal, such as `SIGINT` or `SIGKILL`.
    public func send(_ signal: Int32) {
      kill(process.processIdentifier, signal)
    }

    /// Closes standard input, waits for the exit, and returns how it ended with what is left of
    /// standard output and all of standard error not read yet.
    ///
    /// - Returns: The status and the remaining output.
    @available(*, noasync, message: "it blocks its thread; use the async finish")
    public func finish() -> Result {
      finishBlocking()
    }

    /// Closes standard input and waits for the exit on a thread of its own (see the blocking
    /// ``finish()``).
    ///
    /// - Returns: The status and the remaining output.
    public func finish() async -> Result {
      await BuiltProducts.offThePool { self.finishBlocking() }
    }

    fileprivate func finishBlocking() -> Result {
      if !inputGivenAtStart { try? stdin.fileHandleForWriting.close() }
      let errorsLeft = ErrorsReader(mergingErrors ? nil : errors)
      let rest = output.fileHandleForReading.readDataToEndOfFile()
      process.waitUntilExit()
      return Result(
        status: process.terminationStatus,
        reason: process.terminationReason,
        stdout: String(decoding: rest, as: UTF8.self),
        stderr: String(decoding: errorsLeft.finish(), as: UTF8.self)
      )
    }
  }
}

extension BuiltProducts {
  /// Held while a product's pipes are made and it is started (see ``Running``).
  static let spawning = NSLock()

  /// Runs blocking work (reading a child's output, waiting for its exit) on a thread of its own,
  /// so that a long test does not hold one of the cooperative pool's few threads and stall the
  /// tests running beside it.
  ///
  /// - Parameter body: The blocking work.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` threw.
  public static func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T)
    async throws -> T
  {
    try await withCheckedThrowingContinuation { continuation in
      let thread = Thread { continuation.resume(with: Swift.Result { try body() }) }
      thread.start()
    }
  }

  /// Runs blocking work that cannot fail on a thread of its own (see the throwing form).
  ///
  /// - Parameter body: The blocking work.
  /// - Returns: What `body` returned.
  public static func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
      let thread = Thread { continuation.resume(returning: body()) }
      thread.start()
    }
  }
}
