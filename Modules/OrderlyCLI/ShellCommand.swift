import ArgumentParser
import Foundation
import OrderlyCore
import OrderlyRepository
import OrderlySQLite
import Synchronization

/// `orderly shell`: an interactive notes shell over `NotesRepository` on SQLite.
struct ShellCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "shell",
    abstract: "An interactive notes shell; commands run in the order typed.",
    discussion: """
      Commands: \(ShellLine.usage.joined(separator: "; ")). Each command is enqueued without \
      waiting, so you can type ahead while a slow one runs; answers print in the order the \
      commands were typed. When standard input is not a terminal, commands are read from it: \
      printf 'add milk\\nlist\\n' | orderly shell --in-memory. The exit status is 1 if any \
      line failed. Ctrl-C stops reading and finishes the commands already typed; a second \
      Ctrl-C stops at once and names the commands that were not applied.
      """
  )

  @Option(help: ArgumentHelp("The notes database file.", valueName: "PATH"))
  var database: String?

  @Flag(help: "Keep the notes in memory only.")
  var inMemory = false

  @Option(help: ArgumentHelp("Add latency to every call, in milliseconds.", valueName: "MIN-MAX"))
  var latency: LatencyRange?

  func validate() throws {
    if database != nil && inMemory {
      throw ValidationError("--database and --in-memory cannot be used together; choose one")
    }
  }

  func run() async throws {
    let service: any NotesService
    do {
      if inMemory {
        service = try SQLiteNotesService()
      } else {
        let path = try database ?? Self.defaultDatabasePath()
        service = try SQLiteNotesService(path: path)
      }
    } catch let error as SQLiteNotesError {
      throw fail(error.description)
    } catch let error as RuntimeFailure {
      throw fail(error.message)
    }
    let delayed = latency.map { DelayedNotesService(service, latency: $0.range) } ?? service
    let session = ShellSession(repository: NotesRepository(service: delayed))
    let outcome = await session.run()
    if let service = service as? SQLiteNotesService { try? service.close() }
    switch outcome {
    case .finished: return
    case .someLinesFailed: throw ExitCode.failure
    case .interrupted: throw ExitCode(130)
    }
  }

  /// `$XDG_DATA_HOME/orderly/notes.sqlite`, else `$HOME/.local/share/orderly/notes.sqlite`
  /// (Application Support on macOS); the folder is created if needed.
  static func defaultDatabasePath() throws -> String {
    let environment = ProcessInfo.processInfo.environment
    let folder: URL
    #if os(macOS)
      folder = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        .appendingPathComponent("orderly")
    #else
      // The XDG base directory rules: a relative value is ignored.
      if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
        folder = URL(fileURLWithPath: data).appendingPathComponent("orderly")
      } else if let home = environment["HOME"], home.hasPrefix("/") {
        folder = URL(fileURLWithPath: home).appendingPathComponent(".local/share/orderly")
      } else {
        folder = FileManager.default.homeDirectoryForCurrentUser
          .appendingPathComponent(".local/share/orderly")
      }
    #endif
    do {
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    } catch {
      throw RuntimeFailure(
        message: "cannot create the data folder \(folder.path): \(error.localizedDescription)"
      )
    }
    return folder.appendingPathComponent("notes.sqlite").path
  }
}

/// One line of input, or what was wrong with it before it could be read as text.
enum InputLine: Sendable {
  case text(String)
  case tooLong(bytes: Int)
  case invalidUTF8
  /// Ctrl-C (SIGINT) arrived; `count` says how many times so far.
  case interrupted(count: Int)
  /// Standard input ended. Signals may still follow while accepted commands finish.
  case endOfInput
  /// Every command accepted before the session asked has ended (sent by the session).
  case drained
}

/// Reads standard input on a thread of its own (reads block), split into lines.
///
/// A line longer than ``limit`` bytes is reported, not buffered: its bytes are skipped up to
/// the next newline, so no input can make the shell hold unbounded memory.
enum InputReader {
  static let limit = 4_096

  /// Starts reading; the continuation lets the session add inputs of its own (``InputLine/drained``).
  /// - Returns: The inputs, the continuation, and the signal source, which must be kept alive
  ///   for as long as Ctrl-C should be read.
  static func lines() -> (
    AsyncStream<InputLine>, AsyncStream<InputLine>.Continuation, any DispatchSourceSignal
  ) {
    let (stream, continuation) = AsyncStream.makeStream(of: InputLine.self)
    // Ctrl-C is read as one more input, in order with the lines before it, instead of killing
    // the process with commands still in line.
    signal(SIGINT, SIG_IGN)
    let interrupts = DispatchSource.makeSignalSource(signal: SIGINT)
    let count = Mutex(0)
    interrupts.setEventHandler {
      // Signals that arrive together are coalesced: `data` says how many there were. (The
      // source lives as long as the process, so the cycle this capture makes is harmless.)
      let number = count.withLock { count in
        count += max(1, Int(interrupts.data))
        return count
      }
      continuation.yield(.interrupted(count: number))
    }
    interrupts.resume()
    let thread = Thread {
      var pending = Data()
      var skipped = 0  // bytes of an over-long line being skipped; 0 when not skipping
      func emit(_ bytes: Data) {
        var bytes = bytes
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        if let text = String(validating: bytes, as: UTF8.self) {
          continuation.yield(.text(text))
        } else {
          continuation.yield(.invalidUTF8)
        }
      }
      while true {
        let chunk = FileHandle.standardInput.availableData
        if chunk.isEmpty { break }
        for byte in chunk {
          if byte == UInt8(ascii: "\n") {
            if skipped > 0 {
              continuation.yield(.tooLong(bytes: skipped))
              skipped = 0
            } else {
              emit(pending)
            }
            pending.removeAll(keepingCapacity: true)
          } else if skipped > 0 {
            skipped += 1
          } else if pending.count == limit {
            skipped = pending.count + 1
            pending.removeAll(keepingCapacity: true)
          } else {
            pending.append(byte)
          }
        }
      }
      if skipped > 0 {
        continuation.yield(.tooLong(bytes: skipped))
      } else if !pending.isEmpty {
        emit(pending)
      }
      continuation.yield(.endOfInput)
    }
    thread.start()
    return (stream, continuation, interrupts)
  }
}
