import BuiltProducts
import Foundation
import Testing

/// Runs an example's built binary and returns what it printed (standard output and standard
/// error, in the order printed).
///
/// `swift test` builds the examples first, because this test target depends on them. The wait
/// for the child runs off the cooperative pool (see `BuiltProducts.run`).
func runExample(_ name: String) async throws -> String {
  let result = try await BuiltProducts.run(name, mergingErrors: true)
  #expect(result.status == 0, "\(name) exited with \(result.status)")
  return result.stdout
}

/// The call number of a log line (`start 3 createNote`, `finish task 3 …`, or with its time on
/// a story clock first, `[ 20 ms] finish 1 …`) and its kind.
private func event(_ line: Substring) -> (kind: Substring, number: Int)? {
  var text = line.drop { $0 == " " }
  if text.hasPrefix("["), text.contains(" ms]"), let close = text.firstIndex(of: "]") {
    text = text[text.index(after: close)...]
  }
  let words = text.split(separator: " ")
  guard words.count >= 2 else { return nil }
  if let number = Int(words[1]) { return (words[0], number) }
  if words.count >= 3, words[1] == "task", let number = Int(words[2]) { return (words[0], number) }
  return nil
}

/// The call numbers of the log lines of one kind (`start`, `finish` or `error`), in order.
func tasks(_ kind: String, in output: String) -> [Int] {
  output.split(separator: "\n").compactMap { line -> Int? in
    guard let event = event(line), event.kind == kind else { return nil }
    return event.number
  }
}

/// The log's events in order, as `s1` for a start and `e1` for a finish or an error.
func timeline(of output: String) -> [String] {
  output.split(separator: "\n").compactMap { line -> String? in
    guard let event = event(line) else { return nil }
    switch event.kind {
    case "start": return "s\(event.number)"
    case "finish", "error": return "e\(event.number)"
    default: return nil
    }
  }
}

let seven = Array(1...7)
let sequentialTimeline = seven.flatMap { ["s\($0)", "e\($0)"] }
