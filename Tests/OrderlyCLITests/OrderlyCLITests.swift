import BuiltProducts
import Foundation
import Testing

private struct Report: Decodable {
  struct Run: Decodable {
    let strategy: String
    let inOrder: Bool
    let verdict: String
    let log: [String]
    let spans: [Span]
  }

  struct Span: Decodable {
    let call: Int
    let startMilliseconds: Double
    let endMilliseconds: Double
  }

  let seed: UInt64
  let runs: [Run]
}

private func demoJSON(_ arguments: [String]) async throws -> Report {
  let result = try await orderly(["demo", "--format", "json"] + arguments)
  #expect(result.status == 0, "\(result.stderr)")
  return try JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8))
}

@Suite("orderly demo")
struct DemoTests {
  @Test("serial is in order for 50 seeds, each call ending before the next starts")
  func serialInOrder() async throws {
    for seed in 1...50 {
      let report = try await demoJSON([
        "--strategy", "serial", "--seed", "\(seed)", "--latency", "0-4",
      ])
      let run = try #require(report.runs.first)
      #expect(run.inOrder && run.verdict == "in order", "seed \(seed): \(run.log)")
      #expect(run.spans.map(\.call) == Array(1...7))
      for (previous, next) in zip(run.spans, run.spans.dropFirst()) {
        #expect(previous.endMilliseconds <= next.startMilliseconds, "seed \(seed)")
      }
    }
  }

  @Test("unordered is reported out of order for some seed, naming the calls")
  func unorderedOutOfOrder() async throws {
    var verdicts: [String] = []
    for seed in 1...20 {
      let report = try await demoJSON([
        "--strategy", "unordered", "--seed", "\(seed)", "--latency", "1-60",
      ])
      verdicts.append(try #require(report.runs.first).verdict)
    }
    let outOfOrder = verdicts.filter { $0.hasPrefix("out of order: task ") }
    #expect(!outOfOrder.isEmpty, "\(verdicts)")
    #expect(outOfOrder.allSatisfy { $0.contains(" finished before task ") })
  }

  @Test("the default runs all four strategies, in text with timelines, without colour off a tty")
  func textOutput() async throws {
    let result = try await orderly(["demo", "--latency", "0-5", "--fail-task", "5"])
    #expect(result.status == 0)
    for strategy in ["sequential", "unordered", "actor", "serial"] {
      #expect(result.stdout.contains("== \(strategy): "))
    }
    #expect(result.stdout.components(separatedBy: "Verdict: ").count == 5)
    #expect(result.stdout.contains("5 updateNote │"))
    #expect(result.stdout.contains("error 5 updateNote: injected failure"))
    #expect(!result.stdout.contains("\u{1B}["))
  }

  @Test("JSON output parses and carries the options")
  func json() async throws {
    let report = try await demoJSON(["--seed", "9", "--latency", "0-3"])
    #expect(report.seed == 9)
    #expect(report.runs.map(\.strategy) == ["unordered", "actor", "sequential", "serial"])
    #expect(report.runs.allSatisfy { $0.log.count == 14 && $0.spans.count == 7 })
  }

  @Test(
    "usage errors exit 64 with ArgumentParser's message",
    arguments: [
      ["demo", "--fail-task", "9"], ["demo", "--latency", "50-10"], ["demo", "--latency", "x"],
      ["demo", "--strategy", "random"], ["demo", "--format", "xml"], ["frobnicate"],
      ["shell", "--in-memory", "--database", "/tmp/x.sqlite"],
    ]
  )
  func usageErrors(arguments: [String]) async throws {
    let result = try await orderly(arguments)
    #expect(result.status == 64, "\(arguments): \(result.stderr)")
    #expect(result.stderr.hasPrefix("Error: "))
  }

  @Test("--help and --version exit 0")
  func helpAndVersion() async throws {
    let help = try await orderly(["--help"])
    #expect(help.status == 0 && help.stdout.contains("demo") && help.stdout.contains("shell"))
    let version = try await orderly(["--version"])
    #expect(version.status == 0 && version.stdout == "0.1.0\n")
  }
}

@Suite("orderly shell")
struct ShellTests {
  @Test("a scripted session answers every command in the order typed")
  func scripted() async throws {
    let (status, lines) = try await shell(
      """
      add milk
      add "buy bread" two loaves
      list
      show 2
      edit 1 "oat milk" one litre
      show 1
      rm 2
      list
      help
      """,
      arguments: ["--in-memory", "--latency", "5-30"]
    )
    #expect(status == 0)
    #expect(
      Array(lines.prefix(12)) == [
        "added #1 milk", "added #2 buy bread", "#1 milk", "#2 buy bread", "#2 buy bread",
        "  two loaves", "updated #1 oat milk", "#1 oat milk", "  one litre", "deleted #2",
        "#1 oat milk", "Commands:",
      ]
    )
  }

  @Test("every kind of bad line gets its own one-line error in its place; the shell goes on")
  func badLines() async throws {
    var script = Data()
    let good = "add ok\n"
    let bad: [Data] = [
      Data("frob\n".utf8),
      Data("show\n".utf8),
      Data("add\n".utf8),
      Data("show 42\n".utf8),
      Data("rm abc\n".utf8),
      Data("edit 1\n".utf8),
      Data(("add " + String(repeating: "x", count: 10_000) + "\n").utf8),
      Data([0x61, 0x64, 0x64, 0x20, 0xFF, 0xFE, 0x0A]),
      Data("add \"unclosed\n".utf8),
      Data("list extra\n".utf8),
    ]
    for line in bad { script.append(line + Data(good.utf8)) }
    let (status, lines) = try await shell(script)
    // The README's promise for scripts: any failed line makes the exit status 1.
    #expect(status == 1)
    let expected = [
      "error: line 1: unknown command 'frob' (type 'help' for the commands)",
      "error: line 3: show needs a note id (usage: show ID)",
      "error: line 5: add needs a title (usage: add TITLE [BODY])",
      "error: line 7: could not fetch note 42: no note with id 42",
      "error: line 9: 'abc' is not a note id (ids are whole numbers, like 3)",
      "error: line 11: edit needs a new title (usage: edit ID TITLE [BODY])",
      "error: line 13: the line is too long (10004 bytes; the limit is 4096)",
      "error: line 15: the line is not valid UTF-8 text",
      "error: line 17: a quote is not closed",
      "error: line 19: list takes no arguments",
    ]
    #expect(lines.count == 20, "\(lines)")
    for (index, message) in expected.enumerated() {
      #expect(lines[index * 2] == message)
      #expect(lines[index * 2 + 1] == "added #\(index + 1) ok")
    }
  }

  @Test("empty input exits 0 with nothing printed; quit stops reading")
  func emptyInputAndQuit() async throws {
    let (status, lines) = try await shell("")
    #expect(status == 0 && lines.isEmpty)
    let (quitStatus, quitLines) = try await shell("add a\nquit\nadd b\n")
    #expect(quitStatus == 0 && quitLines == ["added #1 a"])
  }

  @Test("a database that cannot be opened: exit 1, one clear line, the file untouched")
  func badDatabase() async throws {
    let folder = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-cli-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }

    let missing = folder.appendingPathComponent("no/such/notes.sqlite").path
    let result = try await orderly(["shell", "--database", missing], input: Data("list\n".utf8))
    #expect(result.status == 1)
    #expect(result.stderr.hasPrefix("orderly: cannot open the notes database at \(missing): "))
    #expect(result.stderr.split(separator: "\n").count == 1)

    let text = folder.appendingPathComponent("notes.txt")
    let contents = Data("not a database\n".utf8)
    try contents.write(to: text)
    let refused = try await orderly(["shell", "--database", text.path], input: Data("list\n".utf8))
    #expect(refused.status == 1)
    #expect(
      refused.stderr
        == "orderly: \(text.path) is not an Orderly notes database: it is not an SQLite file. "
        + "The file was left untouched; choose another path.\n"
    )
    #expect(try Data(contentsOf: text) == contents)
  }

  @Test("the default database lives under XDG_DATA_HOME, is created on first use, and persists")
  func defaultDatabase() async throws {
    let folder = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-xdg-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let environment = ["XDG_DATA_HOME": folder.path]
    let first = try await orderly(
      ["shell"],
      input: Data("add remembered\n".utf8),
      environment: environment
    )
    #expect(first.status == 0 && first.stdout == "added #1 remembered\n")
    #expect(
      FileManager.default.fileExists(
        atPath: folder.appendingPathComponent("orderly/notes.sqlite").path
      )
    )
    let second = try await orderly(["shell"], input: Data("list\n".utf8), environment: environment)
    #expect(second.stdout == "#1 remembered\n")
  }
}

@Suite("orderly demo: the first look")
struct DemoFirstLookTests {
  @Test("it says what the notes screen is, shows the damage first, one time scale, and a summary")
  func firstLook() async throws {
    let result = try await BuiltProducts.run("orderly", arguments: ["demo", "--seed", "3"])
    #expect(result.status == 0)
    let text = result.stdout
    #expect(text.hasPrefix("The notes screen: when it opens, it makes seven calls"))
    let sections = text.components(separatedBy: "\n== ").dropFirst().map {
      String($0.prefix { $0 != ":" && $0 != "\n" })
    }
    #expect(sections == ["unordered", "actor", "sequential", "serial", "In short"])
    // Every section's timeline ends at the same time.
    let scales = text.split(separator: "\n").filter { $0.hasSuffix(" ms") && $0.contains("0 ms") }
    #expect(scales.count == 4)
    #expect(
      Set(scales.map { $0.split(separator: " ").suffix(2).joined(separator: " ") }).count == 1
    )
    // The two ordered ways are in order by construction; how many answers the others get
    // wrong depends on how the calls were scheduled, so only the lines' shape is checked.
    let summary = try #require(text.components(separatedBy: "== In short\n").last)
    let lines = summary.split(separator: "\n")
    #expect(lines.count == 6)
    #expect(lines[0].hasPrefix("  unordered   ") && lines[1].hasPrefix("  actor       "))
    #expect(lines[2] == "  sequential  in order      every answer as in order")
    #expect(lines[3] == "  serial      in order      every answer as in order")
    // It ends by sending a newcomer to the course's first lesson, a file that exists.
    #expect(lines[5].hasPrefix("starting at docs/course/01-why-order.md"))
    let root = URL(fileURLWithPath: #filePath)
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let lesson = root.appendingPathComponent("docs/course/01-why-order.md")
    #expect(FileManager.default.fileExists(atPath: lesson.path))
  }
}
