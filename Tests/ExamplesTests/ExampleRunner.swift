import BuiltProducts
import Foundation
import Testing

/// Runs an example's built binary and returns what it printed (standard output and standard
/// error, in the order printed).
///
/// `swift test` builds the examples first, because this test target depends on them.
func runExample(_ name: String) throws -> String {
  let result = try BuiltProducts.run(name, mergingErrors: true)
  #expect(result.status == 0, "\(name) exited with \(result.status)")
  return result.stdout
}

/// The task numbers of the log lines of one kind (`start`, `finish` or `error`), in order.
func tasks(_ kind: String, in output: String) -> [Int] {
  output.split(separator: "\n").compactMap { line -> Int? in
    let words = line.split(separator: " ")
    guard words.count >= 3, words[0] == kind, words[1] == "task" else { return nil }
    return Int(words[2])
  }
}

/// The log's task events in order, as `s1` for a start and `e1` for a finish or an error.
func timeline(of output: String) -> [String] {
  output.split(separator: "\n").compactMap { line -> String? in
    let words = line.split(separator: " ")
    guard words.count >= 3, words[1] == "task" else { return nil }
    switch words[0] {
    case "start": return "s\(words[2])"
    case "finish", "error": return "e\(words[2])"
    default: return nil
    }
  }
}

let seven = Array(1...7)
let sequentialTimeline = seven.flatMap { ["s\($0)", "e\($0)"] }
