import ArgumentParser
import Foundation

/// One example of the gallery, as its README's front matter describes it.
struct GalleryEntry: Sendable {
  let name: String
  let title: String
  let lesson: Int
  let summary: String
  /// How to run it: `swift run NAME`, or with `--package-path` for an example that is a
  /// package of its own.
  let command: String
}

/// `orderly examples`: the gallery of runnable examples, by lesson.
struct ExamplesCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "examples",
    abstract: "List the runnable examples, by lesson, with the command that runs each.",
    discussion: """
      Run one from the package's folder with `swift run NAME`. The course in docs/course tells \
      the story of each lesson with the examples' code and output.
      """
  )

  func run() {
    let width = gallery.map(\.name.count).max() ?? 0
    // Every lesson, in order: one that reads the run of an earlier lesson's example (the audit
    // of lesson 19's fleet, in lesson 20) is listed too, and says so.
    for (lesson, title) in lessonTitles.sorted(by: { $0.key < $1.key }) {
      if lesson > 1 { print("") }
      print("Lesson \(lesson): \(title)")
      let entries = gallery.filter { $0.lesson == lesson }
      if entries.isEmpty {
        print("  (no example of its own: it reads the run of an earlier lesson's example)")
      }
      for entry in entries {
        print(
          "  \(entry.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(entry.summary)"
        )
        print("  \(String(repeating: " ", count: width))  \(entry.command)")
      }
    }
  }
}
