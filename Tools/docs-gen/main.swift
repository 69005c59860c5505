// Fills the marked regions of the documentation with real example code, real output and
// timeline pictures drawn from real runs, and writes the examples gallery; `--check` says
// where the committed documentation differs from what a fresh run gives, and changes nothing.
//
//   swift build && swift run docs-gen [--check] [FILE ...]
//
// Markers, each on its own line, closed by `<!-- orderly:end -->`:
//   <!-- orderly:output EXAMPLE -->           what EXAMPLE's binary prints
//   <!-- orderly:code EXAMPLE -->             Examples/EXAMPLE/main.swift
//   <!-- orderly:picture EXAMPLE [FROM] -->   a link to pictures/EXAMPLE.svg beside the file,
//                                             drawn from the log lines EXAMPLE prints (from the
//                                             first line starting with FROM, if given)
//   <!-- orderly:gallery -->                  the table of every example's front matter
//   <!-- orderly:sample NAME -->              the lines between `// sample: NAME` and
//                                             `// end sample` in Tests/DocSamples, a target
//                                             `swift build` compiles: DocC's code samples
// An example whose front matter says `output: varies` shows a recorded run: its output regions
// are compared (and rewritten) only when more than their numbers differ, and its pictures are
// drawn from the recorded run (a fresh run's times differ; its structure must not).
// With no FILE: README.md, every Markdown file under docs/ and the DocC catalogs in Modules/.
// It also writes Modules/OrderlyCLI/Gallery.swift, the list `orderly examples` prints.
// Examples are run from the build folder: a binary that is missing there is built first (the
// root package's with `swift build`, a package example's with `swift build --package-path`), so
// `swift run docs-gen --check` is the one command a fresh clone needs.
import Foundation
import OrderlyCourse
import OrderlyRepository

struct DocsGenError: Error, CustomStringConvertible {
  let description: String
}

let root = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
var outputCache: [String: String] = [:]
/// The recorded run an `output: varies` example's output region keeps, by example: its pictures
/// are drawn from it, so that they match the output shown beside them.
var recordedRuns: [String: String] = [:]
/// The pictures drawn so far, by what they draw: a later picture with the same bars says so.
var drawnPictures: [[String]: (name: String, lesson: Int?)] = [:]

// MARK: - Examples

/// An example's front matter.
struct Example {
  let name: String
  let title: String
  let summary: String
  let lesson: Int
  let modules: [String]
  /// Whether the example's output changes from run to run on purpose (`output: varies`): its
  /// regions are then compared with every number masked, and kept when only numbers differ.
  let outputVaries: Bool
  /// Whether the example is a package of its own (`Examples/NAME/Package.swift`), with heavy
  /// dependencies the root package must not fetch: it is run with `--package-path`.
  let isPackage: Bool

  /// The command that runs it, from the repository's folder.
  var command: String {
    isPackage ? "swift run --package-path Examples/\(name) \(name)" : "swift run \(name)"
  }
}

func frontMatter(of name: String) throws -> Example {
  let readme = root.appendingPathComponent("Examples/\(name)/README.md")
  guard let text = try? String(contentsOf: readme, encoding: .utf8) else {
    throw DocsGenError(description: "\(readme.path): cannot read it")
  }
  let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
  guard lines.first == "---", let end = lines.dropFirst().firstIndex(of: "---") else {
    throw DocsGenError(description: "\(readme.path): no front matter (--- title: ... ---)")
  }
  var fields: [String: String] = [:]
  for line in lines[1..<end] {
    guard let colon = line.firstIndex(of: ":") else { continue }
    fields[String(line[..<colon])] = line[line.index(after: colon)...]
      .trimmingCharacters(in: .whitespaces)
  }
  guard let title = fields["title"], let summary = fields["summary"],
    let lesson = fields["lesson"].flatMap(Int.init), let modules = fields["modules"]
  else {
    throw DocsGenError(
      description: "\(readme.path): front matter needs title, summary, lesson, modules"
    )
  }
  return Example(
    name: name,
    title: title,
    summary: summary,
    lesson: lesson,
    modules: modules.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) },
    outputVaries: fields["output"] == "varies",
    isPackage: FileManager.default.fileExists(
      atPath: root.appendingPathComponent("Examples/\(name)/Package.swift").path
    )
  )
}

/// Every example, by lesson, and within a lesson in the order the lesson shows them (where its
/// name first appears in the lesson's text), not alphabetically.
func allExamples() throws -> [Example] {
  let folder = root.appendingPathComponent("Examples").path
  let names = try FileManager.default.contentsOfDirectory(atPath: folder)
  let examples = try names.filter { !$0.hasPrefix(".") }.sorted().map(frontMatter(of:))
  let course = root.appendingPathComponent("docs/course")
  let lessonFiles = (try? FileManager.default.contentsOfDirectory(atPath: course.path)) ?? []
  var lessonText: [Int: String] = [:]
  for file in lessonFiles where file.hasSuffix(".md") {
    guard let number = Int(file.prefix { $0.isNumber }) else { continue }
    lessonText[number] = try? String(
      contentsOf: course.appendingPathComponent(file),
      encoding: .utf8
    )
  }
  func place(_ example: Example) -> Int {
    guard let text = lessonText[example.lesson],
      let range = text.range(of: "orderly:output \(example.name) ")
        ?? text.range(of: "orderly:code \(example.name) ")
        ?? text.range(of: example.name)
    else { return Int.max }
    return text.distance(from: text.startIndex, to: range.lowerBound)
  }
  return examples.map { ($0, place($0)) }
    .sorted { ($0.0.lesson, $0.1, $0.0.name) < ($1.0.lesson, $1.1, $1.0.name) }
    .map(\.0)
}

/// Where an example's binary is.
func binary(of example: Example) -> URL {
  example.isPackage
    ? root.appendingPathComponent("Examples/\(example.name)/.build/debug/\(example.name)")
    : products.appendingPathComponent(example.name)
}

/// Runs `swift` with `arguments` from the repository's folder, its output going to ours.
func swift(_ arguments: [String]) throws {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
  process.arguments = ["swift"] + arguments
  process.currentDirectoryURL = root
  print("docs-gen: building missing examples: swift \(arguments.joined(separator: " "))")
  fflush(nil)  // every stream, before the build writes its own output to the same descriptor
  try process.run()
  process.waitUntilExit()
  guard process.terminationStatus == 0 else {
    throw DocsGenError(
      description: "`swift \(arguments.joined(separator: " "))` failed "
        + "(exit \(process.terminationStatus)); fix the build, then run docs-gen again"
    )
  }
}

/// Builds every example, so that no output comes from a binary older than its source.
///
/// The root package's examples are built with one build into the folder docs-gen itself runs
/// from, each package example in its own folder. The builds are incremental, so an example
/// that did not change costs only SwiftPM's check that it did not.
func buildExamples() throws {
  let examples = try allExamples()
  if examples.contains(where: { !$0.isPackage }) {
    // products is <scratch>/<triple>/<configuration> (or <scratch>/<configuration>, a link).
    let folder = products.resolvingSymlinksInPath()
    let configuration = folder.lastPathComponent
    let scratch = folder.deletingLastPathComponent().deletingLastPathComponent()
    try swift(["build", "--scratch-path", scratch.path, "-c", configuration])
  }
  for example in examples where example.isPackage {
    try swift(["build", "--package-path", "Examples/\(example.name)", "--product", example.name])
  }
}

@MainActor
func run(example: String) throws -> String {
  if let cached = outputCache[example] { return cached }
  let binary = binary(of: try frontMatter(of: example))
  guard FileManager.default.isExecutableFile(atPath: binary.path) else {
    throw DocsGenError(description: "no binary for example '\(example)' at \(binary.path)")
  }
  let process = Process()
  process.executableURL = binary
  let pipe = Pipe()
  process.standardOutput = pipe
  process.standardError = pipe
  try process.run()
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  guard process.terminationStatus == 0 else {
    throw DocsGenError(description: "example '\(example)' exited with \(process.terminationStatus)")
  }
  let output = String(decoding: data, as: UTF8.self)
  outputCache[example] = output
  return output
}

func code(of example: String, part: String? = nil) throws -> String {
  let folder = root.appendingPathComponent("Examples/\(example)")
  let packaged = folder.appendingPathComponent("Sources/\(example)/main.swift")
  let file =
    FileManager.default.fileExists(atPath: packaged.path)
    ? packaged : folder.appendingPathComponent("main.swift")
  guard let text = try? String(contentsOf: file, encoding: .utf8) else {
    throw DocsGenError(description: "no example named '\(example)' (looked for \(file.path))")
  }
  // The whole file, without the lines that mark its parts for a lesson.
  let lines = text.components(separatedBy: "\n")
  func isMark(_ line: String) -> Bool {
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    return trimmed.hasPrefix("// course: ") || trimmed.hasPrefix("// course end: ")
  }
  guard let part else { return lines.filter { !isMark($0) }.joined(separator: "\n") }
  // One part, `// course: NAME` to `// course end: NAME`: a lesson shows the code it is about
  // and links the whole listing.
  guard
    let start = lines.firstIndex(where: {
      $0.trimmingCharacters(in: .whitespaces) == "// course: \(part)"
    }),
    let end = lines[start...].firstIndex(where: {
      $0.trimmingCharacters(in: .whitespaces) == "// course end: \(part)"
    })
  else {
    throw DocsGenError(
      description: "\(file.path) marks no part '\(part)': put `// course: \(part)` and "
        + "`// course end: \(part)` around it"
    )
  }
  let body = lines[(start + 1)..<end].filter { !isMark($0) }
  let indent =
    body.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    .map { $0.prefix { $0 == " " }.count }.min() ?? 0
  return body.map { String($0.dropFirst(min(indent, $0.prefix { $0 == " " }.count))) }
    .joined(separator: "\n")
}

/// Refuses a Swift code block in a DocC catalog that is not filled from compiled code.
///
/// Each must be an `orderly:sample` (or `orderly:code`) region, so that none can stop compiling
/// unseen. A block that opens with `// Package.swift` shows a manifest line and is exempt.
func checkSamplesCompiled(_ text: String, in file: String) throws {
  var inRegion = false
  let lines = text.components(separatedBy: "\n")
  for (index, line) in lines.enumerated() {
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    if trimmed == "<!-- orderly:end -->" {
      inRegion = false
    } else if trimmed.hasPrefix("<!-- orderly:") {
      inRegion = true
    } else if trimmed.hasPrefix("```swift"), !inRegion,
      lines.indices.contains(index + 1),
      lines[index + 1].trimmingCharacters(in: .whitespaces) != "// Package.swift"
    {
      throw DocsGenError(
        description: "\(file):\(index + 1): a Swift code block that is not compiled; write it "
          + "in Tests/DocSamples between `// sample: NAME` and `// end sample`, and put "
          + "<!-- orderly:sample NAME --> <!-- orderly:end --> here"
      )
    }
  }
}

/// The lines of a compiled code sample, from the files of Tests/DocSamples.
///
/// A part is the lines between `// sample: NAME` and `// end sample`, without their common
/// indentation. A sample may have several parts (its imports at the top of a file, its body in
/// a function): they are joined, with a blank line between them, but for consecutive parts of
/// import lines, which make one block. `// sample: a, b` opens a part of samples a and b both.
func sample(named name: String) throws -> [String] {
  let folder = root.appendingPathComponent("Tests/DocSamples")
  let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
  var parts: [[String]] = []
  for file in files.sorted() where file.hasSuffix(".swift") {
    let url = folder.appendingPathComponent(file)
    guard let text = try? String(contentsOf: url, encoding: .utf8) else { continue }
    let lines = text.components(separatedBy: "\n")
    var index = 0
    // `// sample: a, b` opens a part that samples a and b share (an import line, say).
    while let start = lines[index...].firstIndex(where: {
      let marker = $0.trimmingCharacters(in: .whitespaces)
      guard marker.hasPrefix("// sample: ") else { return false }
      return marker.dropFirst("// sample: ".count).split(separator: ",")
        .contains { $0.trimmingCharacters(in: .whitespaces) == name }
    }) {
      guard
        let end = lines[(start + 1)...].firstIndex(where: {
          $0.trimmingCharacters(in: .whitespaces) == "// end sample"
        })
      else {
        throw DocsGenError(
          description: "Tests/DocSamples/\(file): no `// end sample` after \(name)"
        )
      }
      let body = Array(lines[(start + 1)..<end])
      let indent =
        body.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        .map { $0.prefix { $0 == " " }.count }.min() ?? 0
      parts.append(body.map { String($0.dropFirst(min(indent, $0.prefix { $0 == " " }.count))) })
      index = end + 1
    }
  }
  guard !parts.isEmpty else {
    throw DocsGenError(description: "no sample named '\(name)' in Tests/DocSamples")
  }
  // Parts of import lines only are one block: the sample's imports, then a blank line.
  var joined: [String] = []
  var previousWasImports = false
  for part in parts {
    let imports = part.allSatisfy { $0.hasPrefix("import ") }
    if !joined.isEmpty && !(imports && previousWasImports) { joined.append("") }
    joined += part
    previousWasImports = imports
  }
  return joined
}

// MARK: - Pictures

/// The timeline picture of an example's log lines, from the first line starting with `from`.
@MainActor
func picture(of example: String, from: String?) throws -> TimelinePicture {
  var lines = try (recordedRuns[example] ?? run(example: example)).components(separatedBy: "\n")
  let everyLine = lines
  if let from {
    guard let start = lines.firstIndex(where: { $0.hasPrefix(from) }) else {
      throw DocsGenError(description: "example '\(example)' prints no line starting with '\(from)'")
    }
    lines = Array(lines[start...])
  }
  // The events of one section: indented log lines, up to the first line that is not one.
  var section: [String] = []
  var caption: String?
  var rest: ArraySlice<String> = []
  let body = lines.dropFirst(from == nil ? 0 : 1)
  var sectionEnded = false
  for (index, line) in zip(body.indices, body) {
    if line.hasPrefix("Verdict: ") {
      caption = String(line.dropFirst("Verdict: ".count))
      rest = body[(index + 1)...]
      break
    }
    // After the log, other lines may come before its verdict ("Calls inside the actor at
    // once: 3"); the next indented line is another log, whose verdict is not this one's.
    if sectionEnded {
      if line.hasPrefix(" ") { break }
      continue
    }
    if !line.hasPrefix(" "), !section.isEmpty {
      sectionEnded = true
      continue
    }
    section.append(line)
  }
  // The damage, when the example compared its answers with the in-order run's.
  var consequences: [String] = []
  var answersChecked = false
  if let heading = rest.first, heading.hasPrefix("What went wrong because of the order:") {
    answersChecked = true
    consequences = Array(rest.dropFirst().prefix { $0.hasPrefix("  ") })
  }
  let damage = TimelinePicture.damage(fromConsequences: consequences)
  let title = try frontMatter(of: example).title
  // A picture of one section of several names the run it draws, not only the example: a
  // verdict under the example's title alone would read as the verdict of its other run.
  let runName = from.map { _ in sectionName(lines.first ?? "") }
  var picture = TimelinePicture(
    log: section,
    caption: caption.map { verdict in
      runName.map { "\(title), \($0): \(verdict)" } ?? "\(title): \(verdict)"
    } ?? title,
    answersChecked: answersChecked
  )
  // Rows known only by number (an outbox's `#3`) take the name the example printed for that
  // number anywhere in its output (`  #3 update note 7: "..."`).
  var names: [Int: String] = [:]
  for line in everyLine {
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    guard trimmed.hasPrefix("#"), let space = trimmed.firstIndex(of: " "),
      let number = Int(trimmed[trimmed.index(after: trimmed.startIndex)..<space])
    else { continue }
    names[number] = String(trimmed[trimmed.index(after: space)...])
  }
  for index in picture.rows.indices {
    if let number = Int(picture.rows[index].label), let name = names[number] {
      picture.rows[index].label = "#\(number) \(name)"
    }
  }
  for index in picture.rows.indices {
    let number = picture.rows[index].label.split(separator: " ").first.flatMap { Int($0) }
    picture.rows[index].damage = number.flatMap { damage[$0] }
  }
  guard !picture.rows.isEmpty else {
    throw DocsGenError(description: "example '\(example)' prints no log lines to draw")
  }
  try checkLegend(of: picture, against: section, example: example)
  try checkWaitsDrawn(in: picture, example: example)
  // Retries and dead letters are the story of an outbox's picture: the caption says them.
  if caption == nil, !picture.attemptsSummary.isEmpty {
    picture.caption = "\(title): \(picture.attemptsSummary)"
  } else if caption == nil, from != nil, let heading = lines.first {
    // Two pictures of one example differ by their section: its heading names it. A section
    // that ends with its verdict in parentheses, `  (job 2 waits for job 1 to end: ...)`, has
    // it said under the picture too.
    let name = heading.trimmingCharacters(in: CharacterSet(charactersIn: ": "))
    if let last = section.last?.trimmingCharacters(in: .whitespaces), last.hasPrefix("("),
      last.hasSuffix(")")
    {
      picture.caption = "\(title): \(name): \(last.dropFirst().dropLast())"
    } else {
      picture.caption = "\(title): \(name)"
    }
  }
  return picture
}

/// Refuses a lesson of the course with no picture: every lesson draws the run it teaches, and
/// beside it, its run player.
func checkLessonHasPicture(_ text: String, in file: String) throws {
  let name = String(file.split(separator: "/").last ?? "")
  guard file.hasPrefix("docs/course/"), name.first?.isNumber == true, name.hasSuffix(".md")
  else { return }
  guard text.contains("<!-- orderly:picture ") else {
    throw DocsGenError(
      description: "\(file): a lesson with no picture; draw the run it teaches with "
        + "`<!-- orderly:picture EXAMPLE [SECTION] -->` (and `<!-- orderly:end -->`)"
    )
  }
}

/// The longest a lesson may be, in words (as `wc -w` counts them, code and output included).
let lessonWordLimit = 2_500

/// Refuses a lesson that breaks the shape the course's README promises: at most
/// ``lessonWordLimit`` words, a contract of one sentence, and one to three exercises.
func checkLessonShape(_ text: String, in file: String) throws {
  let name = String(file.split(separator: "/").last ?? "")
  guard file.hasPrefix("docs/course/"), name.first?.isNumber == true, name.hasSuffix(".md")
  else { return }
  let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).count
  guard words <= lessonWordLimit else {
    throw DocsGenError(
      description: "\(file): \(words) words, over the course's \(lessonWordLimit); split "
        + "the lesson at an idea of its own, or show a part of a long example "
        + "(`orderly:code NAME PART`)"
    )
  }
  let sections = text.components(separatedBy: "\n## ")
  guard let contract = sections.first(where: { $0.hasPrefix("The contract\n") }) else {
    throw DocsGenError(description: "\(file): no `## The contract` section")
  }
  // Code spans (`QueueError.reentrantWait`) hold dots that end no sentence.
  let prose = contract.dropFirst("The contract\n".count)
    .replacingOccurrences(of: "`[^`]*`", with: "code", options: .regularExpression)
    .trimmingCharacters(in: .whitespacesAndNewlines)
  let sentences = prose.ranges(of: /[.!?](\*\*)?(\s|$)/).count
  guard prose.hasPrefix("**"), sentences == 1 else {
    throw DocsGenError(
      description: "\(file): the contract is \(sentences) sentences; the course promises "
        + "one, in bold"
    )
  }
  guard let exercises = sections.first(where: { $0.hasPrefix("Try this\n") }) else {
    throw DocsGenError(description: "\(file): no `## Try this` section")
  }
  // An exercise is a numbered item: `1. ...` at the start of a line.
  let count = exercises.split(separator: "\n").count { line in
    line.wholeMatch(of: /[0-9]+\. .*/) != nil
  }
  guard (1...3).contains(count) else {
    throw DocsGenError(
      description: "\(file): \(count) exercises under `## Try this`; the course "
        + "promises one to three"
    )
  }
}

/// Refuses a picture or a run player in `docs/course` that no marker draws any more (a lesson
/// renamed or split would leave its old files behind, still linked from nowhere).
func checkNoStrayPictures(written: Set<String>) throws {
  for folder in ["docs/course/pictures", "docs/course/players"] {
    let names =
      (try? FileManager.default.contentsOfDirectory(
        atPath: root.appendingPathComponent(folder).path
      )) ?? []
    for name in names.sorted() where name.hasSuffix(".svg") || name.hasSuffix(".html") {
      guard written.contains("\(folder)/\(name)") else {
        throw DocsGenError(
          description: "\(folder)/\(name): no picture marker draws it any more; delete it"
        )
      }
    }
  }
}

/// A section's heading as a run's name: `Straight at the service: seven calls...` names the run
/// `straight at the service`.
func sectionName(_ heading: String) -> String {
  let name = heading.components(separatedBy: ": ").first ?? heading
  let trimmed = name.trimmingCharacters(in: CharacterSet(charactersIn: ":.,").union(.whitespaces))
  guard let first = trimmed.first, first.isUppercase, trimmed.dropFirst().first?.isLowercase == true
  else { return trimmed }
  return first.lowercased() + trimmed.dropFirst()
}

/// Refuses a picture whose legend says what the run did not.
///
/// A bar called `cancelled` for a job the run says was replaced, say: each ending the legend
/// names needs its word in the run's own lines.
func checkLegend(of picture: TimelinePicture, against lines: [String], example: String) throws {
  let said = lines.joined(separator: "\n").lowercased()
  let words: [TimelinePicture.Outcome: [String]] = [
    .failed: ["error", "fail"],
    .cancelled: ["cancel"],
    .deadLettered: ["dead letter"],
    .skipped: ["skip"],
    .timedOut: ["timed out"],
    .replaced: ["replaced"],
  ]
  for outcome in Set(picture.rows.map(\.outcome)) {
    guard let allowed = words[outcome], !allowed.contains(where: said.contains) else { continue }
    throw DocsGenError(
      description: "the picture of \(example) calls a bar \"\(outcome.rawValue)\", a word its run "
        + "never says (it would need one of: \(allowed.joined(separator: ", "))): print what "
        + "happened in the run's own words, and teach TimelinePicture that word"
    )
  }
}

/// Refuses a picture on a clock that draws a late job as a sliver with no wait before it.
///
/// A sliver is a bar too thin to see. On a clock a job's bar is as wide as its time, so a late
/// sliver is a job that ran in an instant after waiting for something, and that wait (in its
/// queue's line, for a lease) is the story the picture leaves out. The example prints
/// `waiting N ...` when the job is put in line, and the picture draws the wait. A job that ran
/// in an instant at the start waited for nothing: its sliver is the story.
func checkWaitsDrawn(in picture: TimelinePicture, example: String) throws {
  guard picture.unit == "ms" else { return }
  let low = min(picture.rows.map(\.start).min() ?? 0, 0)
  let high = max(picture.rows.map(\.end).max() ?? 1, low + 1)
  // The bars' width in the drawing (TimelinePicture's plot is 520 pixels wide).
  let pixelsPerUnit = 520 / (high - low)
  for row in picture.rows where (row.end - row.start) * pixelsPerUnit < 6 && row.start > low {
    let waits: Set<TimelinePicture.Segment.Kind> = [.queued, .leaseWait, .wait]
    guard !row.segments.contains(where: { waits.contains($0.kind) }) else { continue }
    throw DocsGenError(
      description: "the picture of \(example) draws \(row.label) as a sliver "
        + "(\(String(format: "%.1f", (row.end - row.start) * pixelsPerUnit)) pixels wide) with no "
        + "wait: print `waiting \(row.label.split(separator: " ").first ?? "N") ...` when it is put "
        + "in line, so the picture draws what it waited for"
    )
  }
  // A key's holder that did its work in an instant draws no bar a reader can see: the work
  // the picture is about (who delivered what, with which fence) takes time in the story.
  for row in picture.rows {
    for hold in row.segments where hold.kind == .hold && (hold.end - hold.start) * pixelsPerUnit < 6
    {
      throw DocsGenError(
        description: "the picture of \(example) draws \(row.label)'s hold by "
          + "\(hold.holder ?? "a worker") as a sliver: let each delivery take a visible time"
      )
    }
  }
}

// MARK: - Gallery

func galleryTable() throws -> String {
  var lines = ["| lesson | example | what it shows | run it |", "|---|---|---|---|"]
  for example in try allExamples() {
    lines.append(
      "| \(example.lesson) | [\(example.title)](../Examples/\(example.name)/README.md) "
        + "| \(example.summary.replacingOccurrences(of: "|", with: "\\|")) "
        + "| `\(example.command)` |"
    )
  }
  return lines.joined(separator: "\n")
}

/// Each lesson's number and title, from the `# Lesson N: Title` heading of its page in
/// docs/course/, with Markdown's code marks taken out (`orderly examples` prints plain text).
func lessonTitles() throws -> [(Int, String)] {
  let folder = root.appendingPathComponent("docs/course")
  let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
  var titles: [(Int, String)] = []
  for name in names where name.hasSuffix(".md") {
    guard let number = name.split(separator: "-").first.flatMap({ Int($0) }) else { continue }
    let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    let prefix = "# Lesson \(number): "
    guard let heading = text.components(separatedBy: "\n").first(where: { $0.hasPrefix(prefix) })
    else {
      throw DocsGenError(description: "docs/course/\(name) has no `\(prefix)...` heading")
    }
    titles.append((number, heading.dropFirst(prefix.count).replacingOccurrences(of: "`", with: "")))
  }
  return titles
}

/// The Swift source of the list `orderly examples` prints.
func gallerySource() throws -> String {
  func literal(_ text: String) -> String {
    "\""
      + text.replacingOccurrences(of: "\\", with: "\\\\")
      .replacingOccurrences(of: "\"", with: "\\\"") + "\""
  }
  var lines = [
    "// swift-format-ignore-file",
    "// Generated by `swift run docs-gen` from the examples' front matter; do not edit.",
    "",
    "/// Each lesson's title, as its page in docs/course/ heads it (without Markdown).",
    "let lessonTitles: [Int: String] = [",
  ]
  for (number, title) in try lessonTitles() {
    lines.append("  \(number): \(literal(title)),")
  }
  lines += [
    "]",
    "",
    "/// Every runnable example, by lesson, as `orderly examples` lists it.",
    "let gallery: [GalleryEntry] = [",
  ]
  for example in try allExamples() {
    lines.append(
      "  GalleryEntry(name: \(literal(example.name)), title: \(literal(example.title)), "
        + "lesson: \(example.lesson),"
    )
    lines.append(
      "    summary: \(literal(example.summary)), command: \(literal(example.command))),"
    )
  }
  lines.append("]")
  return lines.joined(separator: "\n") + "\n"
}

// MARK: - Regions

/// A file the run would write, and what it would write.
struct Change {
  let file: String
  let what: String
  let content: String
}

/// Rewrites the numbers a line of prose quotes from a run, from the run.
///
/// A quoted number is marked inline: `<!-- orderly:value EXAMPLE TEXT -->18<!-- orderly:end -->`,
/// where TEXT is the words around the number in the example's output, with `#` for the number
/// (`# attempts over`), and `##` for a `#` the output prints. So a quoted number cannot go
/// stale: `--check` fails when it differs.
@MainActor
func fillValues(in line: String, file: String, number: Int) throws -> (String, Int) {
  let marker = /<!-- orderly:value (\S+) (.+?) -->(.*?)<!-- orderly:end -->/
  var result = ""
  var rest = Substring(line)
  var count = 0
  while let match = rest.firstMatch(of: marker) {
    let (example, pattern) = (String(match.1), String(match.2))
    let output = try recordedRuns[example] ?? run(example: example)
    guard pattern.contains("#") else {
      throw DocsGenError(
        description: "\(file):\(number): the value marker `\(pattern)` has no `#` for the number"
      )
    }
    // `##` is a `#` the output prints (`save ##3`); `#` alone, the number.
    let escaped = pattern.components(separatedBy: "##").map {
      NSRegularExpression.escapedPattern(for: $0)
        .replacingOccurrences(of: "#", with: "([0-9][0-9,.]*[0-9]|[0-9])")
    }.joined(separator: "#")
    guard let expression = try? NSRegularExpression(pattern: escaped),
      let found = expression.firstMatch(
        in: output,
        range: NSRange(output.startIndex..., in: output)
      ),
      let range = Range(found.range(at: 1), in: output)
    else {
      throw DocsGenError(
        description: "\(file):\(number): the output of \(example) has no line with `\(pattern)`; "
          + "quote words the run prints, with # for the number"
      )
    }
    result += rest[..<match.range.lowerBound]
    result += "<!-- orderly:value \(example) \(pattern) -->\(output[range])<!-- orderly:end -->"
    rest = rest[match.range.upperBound...]
    count += 1
  }
  return (result + rest, count)
}

/// Replaces every marked region of `text`; returns the new text, the number of regions, and the
/// pictures to write.
@MainActor
func fill(_ text: String, in file: String) throws -> (String, Int, [Change]) {
  var lines = text.components(separatedBy: "\n")
  var index = 0
  var regions = 0
  var pictures: [Change] = []
  while index < lines.count {
    if lines[index].contains("<!-- orderly:value ") {
      let (filled, values) = try fillValues(in: lines[index], file: file, number: index + 1)
      lines[index] = filled
      regions += values
      index += 1
      continue
    }
    let line = lines[index].trimmingCharacters(in: .whitespaces)
    guard line.hasPrefix("<!-- orderly:"), line != "<!-- orderly:end -->" else {
      index += 1
      continue
    }
    let words = line.dropFirst("<!-- orderly:".count).split(separator: " ").map(String.init)
    guard words.last == "-->", let kind = words.first,
      ["output", "code", "picture", "gallery", "sample"].contains(kind)
    else {
      throw DocsGenError(description: "\(file):\(index + 1): bad marker \(line)")
    }
    let arguments = Array(words.dropFirst().dropLast())
    guard kind == "gallery" ? arguments.isEmpty : !arguments.isEmpty else {
      throw DocsGenError(description: "\(file):\(index + 1): bad marker \(line)")
    }
    guard
      let end = lines[(index + 1)...].firstIndex(where: {
        $0.trimmingCharacters(in: .whitespaces) == "<!-- orderly:end -->"
      })
    else {
      throw DocsGenError(description: "\(file):\(index + 1): no <!-- orderly:end --> after \(line)")
    }
    let block: [String]
    switch kind {
    case "output":
      let output = try run(example: arguments[0])
      let fresh =
        ["```"] + output.trimmingCharacters(in: .newlines).components(separatedBy: "\n") + ["```"]
      let committed = Array(lines[(index + 1)..<end])
      // A run that varies on purpose keeps its recorded run while only its numbers differ.
      let varies = try frontMatter(of: arguments[0]).outputVaries
      block = varies && structure(of: committed) == structure(of: fresh) ? committed : fresh
      if varies {
        recordedRuns[arguments[0]] = block.dropFirst().dropLast().joined(separator: "\n")
      }
    case "code":
      // `orderly:code NAME` is the whole example; `orderly:code NAME the worker`, one part.
      let part = arguments.count > 1 ? arguments.dropFirst().joined(separator: " ") : nil
      let source = try code(of: arguments[0], part: part)
      block =
        ["```swift"] + source.trimmingCharacters(in: .newlines).components(separatedBy: "\n")
        + ["```"]
    case "sample":
      let lines = try sample(named: arguments[0])
      // A reader copies a sample into a file of their own: it shows the modules it needs.
      guard lines.first?.hasPrefix("import ") == true else {
        throw DocsGenError(
          description: "\(file): the sample \(arguments[0]) shows no import line; mark its "
            + "imports in Tests/DocSamples with `// sample: \(arguments[0])` too"
        )
      }
      block = ["```swift"] + lines + ["```"]
    case "picture":
      let example = arguments[0]
      let section = arguments.count > 1 ? arguments[1] : nil
      let name = ([example] + (section.map { [$0] } ?? []))
        .joined(separator: "-").lowercased()
        .replacingOccurrences(of: "[^a-z0-9]+", with: "-", options: .regularExpression)
        .trimmingCharacters(in: CharacterSet(charactersIn: "-"))
      let folder = file.split(separator: "/").dropLast().joined(separator: "/")
      let prefix = folder.isEmpty ? "" : folder + "/"
      var drawn = try picture(of: example, from: section)
      // Runs in the same order draw the same bars on the event axis: the caption says which
      // picture this one repeats, so a reader knows the sameness is the point.
      let bars =
        [drawn.unit] + drawn.rows.map { "\($0.start) \($0.end) \($0.outcome) \($0.damage ?? "")" }
      let page = String(file.split(separator: "/").last ?? "")
      let lesson = page.split(separator: "-").first.flatMap { Int($0) }
      let here = "\(try frontMatter(of: example).title)" + (lesson.map { " (lesson \($0))" } ?? "")
      // Within a lesson that is a point made on purpose (an actor gives the same order as bare
      // tasks); across lessons it is a picture that shows nothing the reader has not seen.
      if let earlier = drawnPictures[bars], earlier.name != here {
        if let lesson, let other = earlier.lesson, other != lesson {
          throw DocsGenError(
            description: "\(file): the picture of \(example) draws the same bars as "
              + "\(earlier.name); draw what this lesson's queue changes (on the clock), or show no picture"
          )
        }
        drawn.caption += ", the same bars as \(earlier.name): the same order"
      } else if drawnPictures[bars] == nil {
        drawnPictures[bars] = (here, lesson)
      }
      pictures.append(
        Change(
          file: prefix + "pictures/\(name).svg",
          what: "picture of \(arguments.joined(separator: " "))",
          content: drawn.svg()
        )
      )
      // The run player, beside the picture: it replays the same events one at a time.
      let heading =
        text.components(separatedBy: "\n").first { $0.hasPrefix("# ") }
        .map { String($0.dropFirst(2)).replacingOccurrences(of: "`", with: "") } ?? page
      pictures.append(
        Change(
          file: prefix + "players/\(name).html",
          what: "run player of \(arguments.joined(separator: " "))",
          content: drawn.playerPage(
            title: heading,
            // The lesson's page as the repository has it (Markdown); the documentation site
            // (Tools/docs-site/render.py) points the link at the page it renders.
            back: ("../" + page, "Back to the lesson")
          )
        )
      )
      block = [
        "![\(drawn.altText)](pictures/\(name).svg)",
        "",
        "[▶ Replay this run step by step](players/\(name).html) (\(drawn.steps.count) events; "
          + "Play, Step, a slider, or the keyboard)",
      ]
    default:
      block = try galleryTable().components(separatedBy: "\n")
    }
    lines.replaceSubrange((index + 1)..<end, with: block)
    index += block.count + 2
    regions += 1
  }
  return (lines.joined(separator: "\n"), regions, pictures)
}

/// The lines with every run of digits replaced by `#`: what a varying run keeps from one run to
/// the next.
func structure(of lines: [String]) -> [String] {
  lines.map {
    $0.replacingOccurrences(
      of: "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
      with: "#",
      options: .regularExpression
    )
    .replacingOccurrences(of: "[0-9]+", with: "#", options: .regularExpression)
    // A table's columns widen with their numbers: the spaces between cells are not compared.
    .replacingOccurrences(of: " {2,}", with: "  ", options: .regularExpression)
  }
}

/// Where two versions of a file first differ, as a line number.
func firstDifference(_ old: String, _ new: String) -> Int {
  let a = old.components(separatedBy: "\n")
  let b = new.components(separatedBy: "\n")
  for index in 0..<max(a.count, b.count)
  where index >= a.count || index >= b.count || a[index] != b[index] {
    return index + 1
  }
  return 1
}

func markdownFiles() -> [String] {
  var files: [String] = ["README.md"]
  // Each example's own page shows its code.
  let examples = root.appendingPathComponent("Examples")
  for name in (try? FileManager.default.contentsOfDirectory(atPath: examples.path)) ?? []
  where FileManager.default.fileExists(
    atPath: examples.appendingPathComponent("\(name)/README.md").path
  ) {
    files.append("Examples/\(name)/README.md")
  }
  for folder in ["docs", "Modules"] {
    let enumerator = FileManager.default.enumerator(
      atPath: root.appendingPathComponent(folder).path
    )
    while let path = enumerator?.nextObject() as? String {
      if path.hasSuffix(".md") { files.append("\(folder)/\(path)") }
    }
  }
  return files.sorted()
}

do {
  var arguments = Array(CommandLine.arguments.dropFirst())
  let check = arguments.contains("--check")
  arguments.removeAll { $0 == "--check" }
  let files = arguments.isEmpty ? markdownFiles() : arguments
  try buildExamples()
  var changes: [Change] = []
  for file in files {
    let url = root.appendingPathComponent(file)
    guard let text = try? String(contentsOf: url, encoding: .utf8) else {
      throw DocsGenError(description: "cannot read \(file)")
    }
    if file.contains(".docc/") { try checkSamplesCompiled(text, in: file) }
    try checkLessonHasPicture(text, in: file)
    try checkLessonShape(text, in: file)
    let (filled, regions, pictures) = try fill(text, in: file)
    if regions > 0 { changes.append(Change(file: file, what: "regions", content: filled)) }
    changes += pictures
  }
  if arguments.isEmpty {
    try checkNoStrayPictures(written: Set(changes.map(\.file)))
    changes.append(
      Change(
        file: "Modules/OrderlyCLI/Gallery.swift",
        what: "gallery",
        content: try gallerySource()
      )
    )
  }
  var stale = 0
  for change in changes {
    let url = root.appendingPathComponent(change.file)
    let current = try? String(contentsOf: url, encoding: .utf8)
    guard current != change.content else { continue }
    if check {
      stale += 1
      let line = current.map { firstDifference($0, change.content) } ?? 1
      print("\(change.file):\(line): \(change.what) differs from a fresh run")
    } else {
      try FileManager.default.createDirectory(
        at: url.deletingLastPathComponent(),
        withIntermediateDirectories: true
      )
      try change.content.write(to: url, atomically: true, encoding: .utf8)
      print("\(change.file): \(change.what) written")
    }
  }
  if check {
    if stale > 0 {
      print("docs-gen --check: \(stale) file(s) differ; run `swift run docs-gen` and commit them")
      exit(1)
    }
    print("docs-gen --check: every generated region, picture and the gallery match a fresh run")
  }
} catch {
  FileHandle.standardError.write(Data("docs-gen: \(error)\n".utf8))
  exit(1)
}
