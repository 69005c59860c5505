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
    var lesson = 0
    for entry in gallery {
      if entry.lesson != lesson {
        lesson = entry.lesson
        if lesson > 1 { print("") }
        print("Lesson \(lesson): \(lessonTitles[lesson] ?? "")")
      }
      print(
        "  \(entry.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(entry.summary)"
      )
      print("  \(String(repeating: " ", count: width))  \(entry.command)")
    }
  }
}
