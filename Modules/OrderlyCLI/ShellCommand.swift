import ArgumentParser
import Foundation
import OrderlyCore
import OrderlyRepository
import OrderlySQLite

/// `orderly shell`: an interactive notes shell over `NotesRepository` on SQLite.
struct ShellCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "shell",
    abstract: "An interactive notes shell; commands run in the order typed.",
    discussion: """
      Commands: \(ShellLine.usage.joined(separator: "; ")). Each command is enqueued without \
      waiting, so you can type ahead while a slow one runs; answers print in the order the \
      commands were typed. When standard input is not a terminal, commands are read from it: \
      printf 'add milk\\nlist\\n' | orderly shell --in-memory
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
    await session.run()
  }

  /// `$XDG_DATA_HOME/orderly/notes.sqlite`, else `~/.local/share/orderly/notes.sqlite`
  /// (Application Support on macOS); the folder is created if needed.
  static func defaultDatabasePath() throws -> String {
    let environment = ProcessInfo.processInfo.environment
    let folder: URL
    #if os(macOS)
      folder = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
        .appendingPathComponent("orderly")
    #else
      if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
        folder = URL(fileURLWithPath: data).appendingPathComponent("orderly")
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
}

/// Reads standard input on a thread of its own (reads block), split into lines.
///
/// A line longer than ``limit`` bytes is reported, not buffered: its bytes are skipped up to
/// the next newline, so no input can make the shell hold unbounded memory.
enum InputReader {
  static let limit = 4_096

  static func lines() -> AsyncStream<InputLine> {
    let (stream, continuation) = AsyncStream.makeStream(of: InputLine.self)
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
      continuation.finish()
    }
    thread.start()
    return stream
  }
}
