// Fills the marked regions of the documentation with real example code and real output.
//
//   swift build && swift run docs-gen [FILE ...]
//
// In a Markdown file, a region between
//   <!-- orderly:output EXAMPLE -->  and  <!-- orderly:end -->
// is replaced with what `EXAMPLE`'s binary prints, and a region opened by
//   <!-- orderly:code EXAMPLE -->
// with `Examples/EXAMPLE/main.swift`. With no FILE, README.md, every Markdown file under `docs/`
// and the DocC catalogs in `Modules/` are processed. Examples are run from the build folder, so build
// them first.
import Foundation

struct DocsGenError: Error, CustomStringConvertible {
  let description: String
}

let root = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
var outputCache: [String: String] = [:]

@MainActor
func run(example: String) throws -> String {
  if let cached = outputCache[example] { return cached }
  let binary = products.appendingPathComponent(example)
  guard FileManager.default.isExecutableFile(atPath: binary.path) else {
    throw DocsGenError(
      description: "no binary for example '\(example)' at \(binary.path): run `swift build` first"
    )
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

func code(of example: String) throws -> String {
  let file = root.appendingPathComponent("Examples/\(example)/main.swift")
  guard let text = try? String(contentsOf: file, encoding: .utf8) else {
    throw DocsGenError(description: "no example named '\(example)' (looked for \(file.path))")
  }
  return text
}

/// Replaces every marked region of `text`; returns the new text and the number of regions.
@MainActor
func fill(_ text: String, in file: String) throws -> (String, Int) {
  var lines = text.components(separatedBy: "\n")
  var index = 0
  var regions = 0
  while index < lines.count {
    let line = lines[index].trimmingCharacters(in: .whitespaces)
    guard line.hasPrefix("<!-- orderly:"), line != "<!-- orderly:end -->" else {
      index += 1
      continue
    }
    let words = line.dropFirst("<!-- orderly:".count).split(separator: " ")
    guard words.count == 3, words[2] == "-->", ["output", "code"].contains(words[0]) else {
      throw DocsGenError(description: "\(file):\(index + 1): bad marker \(line)")
    }
    guard
      let end = lines[(index + 1)...].firstIndex(where: {
        $0.trimmingCharacters(in: .whitespaces) == "<!-- orderly:end -->"
      })
    else {
      throw DocsGenError(description: "\(file):\(index + 1): no <!-- orderly:end --> after \(line)")
    }
    let example = String(words[1])
    let body: String
    let fence: String
    if words[0] == "output" {
      body = try run(example: example)
      fence = "```"
    } else {
      body = try code(of: example)
      fence = "```swift"
    }
    let block =
      [fence] + body.trimmingCharacters(in: .newlines).components(separatedBy: "\n") + ["```"]
    lines.replaceSubrange((index + 1)..<end, with: block)
    index += block.count + 2
    regions += 1
  }
  return (lines.joined(separator: "\n"), regions)
}

func markdownFiles() -> [String] {
  var files: [String] = ["README.md"]
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
  let files =
    CommandLine.arguments.count > 1 ? Array(CommandLine.arguments.dropFirst()) : markdownFiles()
  for file in files {
    let url = root.appendingPathComponent(file)
    guard let text = try? String(contentsOf: url, encoding: .utf8) else {
      throw DocsGenError(description: "cannot read \(file)")
    }
    let (filled, regions) = try fill(text, in: file)
    if regions > 0 {
      try filled.write(to: url, atomically: true, encoding: .utf8)
      print("\(file): \(regions) region\(regions == 1 ? "" : "s") filled")
    }
  }
} catch {
  FileHandle.standardError.write(Data("docs-gen: \(error)\n".utf8))
  exit(1)
}
