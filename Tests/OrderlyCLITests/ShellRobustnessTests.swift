import BuiltProducts
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A folder for one test's files, removed at the end.
private func scratchFolder() throws -> URL {
  let folder = FileManager.default.temporaryDirectory
    .appendingPathComponent("orderly-shell-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  return folder
}

/// A shell whose standard input stays open, so a test can type, wait and send signals.
private func runningShell(_ arguments: [String]) throws -> BuiltProducts.Running {
  try BuiltProducts.Running("orderly", arguments: ["shell"] + arguments)
}

@Suite("orderly shell: interrupts, shared files, unkind input")
struct ShellRobustnessTests {
  @Test("Ctrl-C finishes the commands already typed, then exits 130")
  func interruptFinishesTypedAhead() async throws {
    let folder = try scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let database = folder.appendingPathComponent("notes.sqlite").path
    let shell = try runningShell(["--database", database, "--latency", "1000-1000"])
    shell.type("add one\nadd two\nadd three\n")
    // The first answer comes after a second; by then all three lines were read and are in line.
    // Ctrl-C is sent from the thread that read the answer, at once: no wait for the cooperative
    // pool (busy with other tests) stands between the two.
    let first = await BuiltProducts.offThePool { () -> [String] in
      let lines = shell.readLines(1)
      shell.send(SIGINT)
      return lines
    }
    #expect(first == ["added #1 one"])
    let (status, stdout, stderr) = await shell.finish().parts
    #expect(status == 130)
    #expect(stdout == "added #2 two\nadded #3 three\n")
    #expect(stderr.contains("interrupted: finishing the 2 commands already typed"))
    let listed = try await orderly(["shell", "--database", database], input: Data("list\n".utf8))
    #expect(listed.stdout == "#1 one\n#2 two\n#3 three\n")
  }

  @Test("a second Ctrl-C stops at once and names every command it did not apply")
  func secondInterruptNamesWhatWasDropped() async throws {
    let folder = try scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let database = folder.appendingPathComponent("notes.sqlite").path
    let shell = try runningShell(["--database", database, "--latency", "1000-1000"])
    shell.type("add one\nadd two\nadd three\nadd four\n")
    // Each reaction comes from the thread that read what it reacts to (see the test above).
    let (answer, first) = await BuiltProducts.offThePool { () -> ([String], String) in
      let answer = shell.readLines(1)
      shell.send(SIGINT)
      // A second signal sent before the first is delivered merges with it (POSIX does not
      // queue them): press again once the shell has answered the first.
      let first = shell.readErrors(until: "Ctrl-C again")
      shell.send(SIGINT)
      return (answer, first)
    }
    #expect(answer == ["added #1 one"])
    var (status, stdout, stderr) = await shell.finish().parts
    stderr = first + stderr
    #expect(status == 130)
    // Every command was applied (answered) or is named as not applied, the one running when
    // the second Ctrl-C cancelled it included; none is both, none is missing.
    let applied =
      ["one"]
      + stdout.split(separator: "\n").compactMap { line in
        line.hasPrefix("added #") ? line.split(separator: " ").last.map(String.init) : nil
      }
    let notApplied = stderr.split(separator: "\n").compactMap { line in
      line.hasPrefix("  line ") ? line.split(separator: " ").last.map(String.init) : nil
    }
    #expect(Set(applied).isDisjoint(with: notApplied), "\(stdout)\n\(stderr)")
    #expect(Set(applied + notApplied) == ["one", "two", "three", "four"], "\(stdout)\n\(stderr)")
    #expect(notApplied.last == "four", "\(stdout)\n\(stderr)")
    #expect(!stderr.contains("cancelled"), "\(stderr)")
    let listed = try await orderly(["shell", "--database", database], input: Data("list\n".utf8))
    #expect(listed.stdout.split(separator: "\n").count == applied.count)
  }

  @Test("a Ctrl-C sent while the shell starts up is never lost: 200 rounds")
  func interruptAtStartUp() async throws {
    let lost = try await BuiltProducts.offThePool {
      var generator = SystemRandomNumberGenerator()
      var lost = 0
      for _ in 0..<200 {
        let shell = try runningShell(["--in-memory"])
        usleep(UInt32.random(in: 0...30_000, using: &generator))
        shell.send(SIGINT)
        // Standard input stays open: only the Ctrl-C can end the shell. A lost one would leave
        // it reading forever; after 20 s the watchdog counts it lost and ends it.
        let watchdog = DispatchWorkItem { shell.send(SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 20, execute: watchdog)
        shell.process.waitUntilExit()
        watchdog.cancel()
        let ended = shell.finish()
        if ended.reason == .uncaughtSignal && ended.status == SIGKILL { lost += 1 }
      }
      return lost
    }
    #expect(lost == 0)
  }

  @Test("standard output that cannot be written: one line on standard error, exit 1, no crash")
  func fullStandardOutput() async throws {
    let result = try await BuiltProducts.offThePool { () throws -> (Int32, String) in
      let process = Process()
      process.executableURL = BuiltProducts.url(of: "orderly")
      process.arguments = ["shell", "--in-memory"]
      let input = Pipe()
      let errors = Pipe()
      process.standardInput = input
      process.standardOutput = FileHandle(forWritingAtPath: "/dev/full")
      process.standardError = errors
      try process.run()
      input.fileHandleForWriting.write(Data("add x\nadd y\nlist\n".utf8))
      try input.fileHandleForWriting.close()
      let stderr = errors.fileHandleForReading.readDataToEndOfFile()
      process.waitUntilExit()
      return (process.terminationStatus, String(decoding: stderr, as: UTF8.self))
    }
    #expect(result.0 == 1)
    #expect(result.1.split(separator: "\n").count == 1, "\(result.1)")
    #expect(result.1.contains("cannot write to standard output"), "\(result.1)")
    #expect(!result.1.contains("Fatal error"))
  }

  @Test("two shells on one file add 300 notes each at once; none is refused")
  func concurrentShells() async throws {
    let folder = try scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let database = folder.appendingPathComponent("notes.sqlite").path
    let results = try await withThrowingTaskGroup(of: CLIResult.self) { group in
      for name in ["a", "b"] {
        let script = (0..<300).map { "add \(name)\($0)\n" }.joined()
        group.addTask {
          try await orderly(["shell", "--database", database], input: Data(script.utf8))
        }
      }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    for result in results {
      #expect(result.status == 0, "\(result.stderr)")
      #expect(!result.stderr.contains("locked"))
      #expect(result.stdout.split(separator: "\n").count == 300)
    }
    let listed = try await orderly(["shell", "--database", database], input: Data("list\n".utf8))
    #expect(listed.stdout.split(separator: "\n").count == 600)
  }

  @Test("control characters in a bad line or a stored text are printed escaped")
  func controlCharactersEscaped() async throws {
    let (status, lines) = try await shell(
      "fr\u{1B}[Aob\nshow \u{7}\nadd ok \"a\u{1B}[31mb\"\nshow 1\n"
    )
    #expect(status == 1)
    #expect(
      lines == [
        "error: line 1: unknown command 'fr\\u{1B}[Aob' (type 'help' for the commands)",
        "error: line 2: '\\u{07}' is not a note id (ids are whole numbers, like 3)",
        "added #1 ok", "#1 ok", "  a\\u{1B}[31mb",
      ]
    )
    // A right-to-left override would make the rest of the line read backwards.
    let (_, bidi) = try await shell("add \"a\u{202E}cba\" \"x\u{2066}y\"\nshow 1\n")
    #expect(bidi == ["added #1 a\\u{202E}cba", "#1 a\\u{202E}cba", "  x\\u{2066}y"])
  }

  @Test("a NUL or a control character in a title is refused, and nothing is stored")
  func nulRefused() async throws {
    let (status, lines) = try await shell(Data("add \0\nadd a\0b\nadd x \"y\0z\"\nlist\n".utf8))
    #expect(status == 1)
    #expect(lines.count == 4, "\(lines)")
    #expect(lines[0].hasPrefix("error: line 1: could not create the note: a title cannot contain"))
    #expect(lines[1].hasPrefix("error: line 2: could not create the note: a title cannot contain"))
    #expect(lines[2].hasPrefix("error: line 3: could not create the note: the text cannot contain"))
    #expect(lines[3] == "(no notes)")
    #expect(!lines.joined().contains("\0"))
  }

  @Test("without XDG_DATA_HOME, the default database lives under $HOME/.local/share")
  func homeHonoured() async throws {
    let home = try scratchFolder()
    defer { try? FileManager.default.removeItem(at: home) }
    let result = try await orderly(
      ["shell"],
      input: Data("add at home\n".utf8),
      environment: ["HOME": home.path, "XDG_DATA_HOME": ""]
    )
    #expect(result.status == 0, "\(result.stderr)")
    let file = home.appendingPathComponent(".local/share/orderly/notes.sqlite").path
    #expect(FileManager.default.fileExists(atPath: file))
  }

  @Test("a FIFO as the database is refused at once with one line; nothing hangs")
  func fifoDatabase() async throws {
    let folder = try scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let path = folder.appendingPathComponent("pipe").path
    #expect(mkfifo(path, 0o600) == 0)
    let result = try await orderly(["shell", "--database", path], input: Data("list\n".utf8))
    #expect(result.status == 1)
    #expect(result.stderr.split(separator: "\n").count == 1)
    #expect(result.stderr.contains("it is a FIFO"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["pipe"])
  }
}

@Suite("orderly examples and the demo's pictures")
struct GalleryAndPictureTests {
  @Test("orderly examples lists every example folder with the command that runs it")
  func examples() async throws {
    let result = try await orderly(["examples"])
    #expect(result.status == 0)
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let folders = try FileManager.default.contentsOfDirectory(
      atPath: root.appendingPathComponent("Examples").path
    )
    #expect(folders.count >= 20)
    for folder in folders {
      let isPackage = FileManager.default.fileExists(
        atPath: root.appendingPathComponent("Examples/\(folder)/Package.swift").path
      )
      let command =
        isPackage ? "swift run --package-path Examples/\(folder) \(folder)" : "swift run \(folder)"
      #expect(result.stdout.contains(command + "\n"), "\(folder) is not listed")
    }
    #expect(result.stdout.hasPrefix("Lesson 1: Why Task {} calls finish out of order\n"))
    // Every lesson of the course, with the title its page gives it (code marks taken out).
    let course = root.appendingPathComponent("docs/course")
    let pages = try FileManager.default.contentsOfDirectory(atPath: course.path)
      .filter { $0.first?.isNumber == true && $0.hasSuffix(".md") }
    #expect(pages.count >= 10)
    for page in pages {
      let text = try String(contentsOf: course.appendingPathComponent(page), encoding: .utf8)
      let heading = text.split(separator: "\n").first { $0.hasPrefix("# Lesson ") }
      let title = heading.map { $0.dropFirst(2).replacingOccurrences(of: "`", with: "") }
      let line = (title ?? "no heading in \(page)") + "\n"
      let listed = result.stdout.contains(line)
      #expect(listed, "orderly examples does not print `\(line)`")
    }
    let untitled = result.stdout.split(separator: "\n").filter {
      $0.hasPrefix("Lesson ") && $0.hasSuffix(": ")
    }
    #expect(untitled.isEmpty)
  }

  @Test("orderly demo --format svg prints a timeline picture, or writes it with --output")
  func svg() async throws {
    let printed = try await orderly([
      "demo", "--strategy", "serial", "--format", "svg", "--latency", "1-5",
    ])
    #expect(printed.status == 0)
    #expect(printed.stdout.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
    #expect(printed.stdout.contains("7 deleteNote") && printed.stdout.contains("serial: in order"))
    let file = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-demo-\(UUID().uuidString).svg")
    defer { try? FileManager.default.removeItem(at: file) }
    let written = try await orderly([
      "demo", "--format", "svg", "--latency", "1-5", "--output", file.path,
    ])
    #expect(written.status == 0 && written.stdout.isEmpty)
    let svg = try String(contentsOf: file, encoding: .utf8)
    #expect(svg.contains("unordered · 1 fetchNotes") && svg.contains("serial · 7 deleteNote"))
  }

  @Test("the demo says what went wrong because of the order")
  func consequences() async throws {
    let result = try await orderly([
      "demo", "--strategy", "unordered", "--seed", "3", "--latency", "20-380",
    ])
    #expect(result.stdout.contains("What went wrong because of the order:"))
    #expect(result.stdout.contains("call 4 fetchNotes saw 2 notes; in order it would have seen 3"))
  }
}

extension BuiltProducts.Result {
  /// The status, standard output and standard error, to destructure.
  fileprivate var parts: (Int32, String, String) { (status, stdout, stderr) }
}
