import Foundation
import Testing

/// The examples' folders, their front matter, and this target's test files.
private enum Gallery {
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  static var examples: [String] {
    let folder = root.appendingPathComponent("Examples").path
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    return names.filter { !$0.hasPrefix(".") }.sorted()
  }

  /// The front matter of an example's README: its `key: value` lines, or `nil` if it has none.
  static func frontMatter(of example: String) -> [String: String]? {
    let readme = root.appendingPathComponent("Examples/\(example)/README.md")
    guard let text = try? String(contentsOf: readme, encoding: .utf8) else { return nil }
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    guard lines.first == "---", let end = lines.dropFirst().firstIndex(of: "---") else {
      return nil
    }
    var fields: [String: String] = [:]
    for line in lines[1..<end] {
      guard let colon = line.firstIndex(of: ":") else { continue }
      fields[String(line[..<colon])] = line[line.index(after: colon)...]
        .trimmingCharacters(in: .whitespaces)
    }
    return fields
  }

  /// The numbers of the course's lessons (`docs/course/16-outbox.md` is lesson 16).
  static var lessonNumbers: Set<Int> {
    let folder = root.appendingPathComponent("docs/course").path
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    return Set(names.filter { $0.hasSuffix(".md") }.compactMap { Int($0.prefix(2)) })
  }

  /// Whether an example is a package of its own (built and tested by `.ci/run` in its folder).
  static func isPackage(_ example: String) -> Bool {
    FileManager.default.fileExists(
      atPath: root.appendingPathComponent("Examples/\(example)/Package.swift").path
    )
  }

  /// Every Swift test file of this target, as one text.
  static var testSources: String {
    let folder = root.appendingPathComponent("Tests/ExamplesTests")
    let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    return files.filter { $0.hasSuffix(".swift") }.compactMap {
      try? String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8)
    }.joined(separator: "\n")
  }
}

@Suite("The examples gallery")
struct GalleryTests {
  @Test("there are examples to check")
  func examplesFound() {
    #expect(Gallery.examples.count >= 20)
  }

  @Test("every example has a main.swift and a README opening with complete front matter")
  func frontMatter() {
    for example in Gallery.examples {
      let main = Gallery.root.appendingPathComponent(
        Gallery.isPackage(example)
          ? "Examples/\(example)/Sources/\(example)/main.swift" : "Examples/\(example)/main.swift"
      ).path
      #expect(FileManager.default.fileExists(atPath: main), "\(example) has no main.swift")
      guard let fields = Gallery.frontMatter(of: example) else {
        Issue.record("\(example)/README.md does not open with a front matter (--- ... ---)")
        continue
      }
      for key in ["title", "summary", "lesson", "modules"] {
        #expect(fields[key].map { !$0.isEmpty } == true, "\(example) has no '\(key)'")
      }
      let lessons = Gallery.lessonNumbers
      #expect(
        fields["lesson"].flatMap(Int.init).map(lessons.contains) == true,
        "\(example)'s lesson is not the number of a lesson in docs/course (\(lessons.sorted()))"
      )
    }
  }

  @Test("every example is run by a test of this target, or is a package with its own tests")
  func everyExampleRun() {
    let sources = Gallery.testSources
    for example in Gallery.examples where !Gallery.isPackage(example) {
      #expect(
        sources.contains("runExample(\"\(example)\")")
          || sources.contains("\"\(example)\""),
        "no test runs \(example)"
      )
    }
  }
}
