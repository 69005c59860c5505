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
    // First: a Ctrl-C from now on is read as input, never lost and never fatal.
    InterruptPipe.install()
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
  ///
  /// Ctrl-C arrives through ``InterruptPipe``, installed when the command starts: one thread
  /// turns its bytes into ``InputLine/interrupted(count:)``, in order with the lines read
  /// before it, instead of the signal killing the process with commands still in line.
  ///
  /// - Returns: The inputs and the continuation.
  static func lines() -> (AsyncStream<InputLine>, AsyncStream<InputLine>.Continuation) {
    let (stream, continuation) = AsyncStream.makeStream(of: InputLine.self)
    let interrupts = Thread {
      var count = 0
      var bytes = [UInt8](repeating: 0, count: 16)
      while true {
        let read = read(InterruptPipe.descriptors.read, &bytes, bytes.count)
        if read < 0 && errno == EINTR { continue }
        guard read > 0 else { return }
        // Signals that arrive together are read together: each byte is one Ctrl-C.
        count += read
        continuation.yield(.interrupted(count: count))
      }
    }
    interrupts.start()
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
    return (stream, continuation)
  }
}

/// Ctrl-C as bytes on a pipe: a `SIGINT` handler writes one byte per signal, which
/// ``InputReader`` reads as input.
///
/// The handler replaces the default action in one step (no moment where the signal is ignored,
/// as with `SIG_IGN` followed by a dispatch source, whose registration completes later and lost
/// a Ctrl-C typed at start-up), and a signal that arrives before the reader runs waits in the
/// pipe. It is installed with `SA_RESTART` semantics (`signal` on Linux and macOS), so the
/// blocking read of standard input is not interrupted by it.
enum InterruptPipe {
  /// The pipe: the handler writes to `write`, ``InputReader`` reads `read`.
  static let descriptors: (read: Int32, write: Int32) = {
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return (-1, -1) }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    // A full pipe (thousands of unread Ctrl-Cs) drops the byte instead of blocking the handler.
    _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
    return (ends[0], ends[1])
  }()

  /// Makes `SIGINT` write to the pipe from now on.
  static func install() {
    // Created before the handler can run: the handler only reads the descriptors.
    guard descriptors.write >= 0 else { return }
    signal(SIGINT) { _ in
      var byte: UInt8 = 1
      // write(2) is async-signal-safe; errno is restored, as a handler must.
      let saved = errno
      _ = write(InterruptPipe.descriptors.write, &byte, 1)
      errno = saved
    }
  }
}
