// Search as you type: "swift" typed one letter at a time while the first search runs. A
// CoalescingQueue runs the search in progress, then only the newest query; the queries typed in
// between are replaced and never reach the server.
import OrderlyCore

/// A search server that holds the first search until the test says so, and counts calls.
actor SearchServer {
  private var calls: [String] = []
  private var held: CheckedContinuation<Void, Never>?
  private var holdFirst = true

  func search(_ query: String) async -> [String] {
    calls.append(query)
    if holdFirst {
      holdFirst = false
      await withCheckedContinuation { held = $0 }
    }
    let words = ["swift", "swiftly", "sweet", "swim", "sword"]
    return words.filter { $0.hasPrefix(query) }
  }

  /// Lets the first search answer.
  func answerFirst() {
    held?.resume()
    held = nil
  }

  /// Whether the first search has arrived and is being held.
  var isHoldingFirst: Bool { held != nil }

  var received: [String] { calls }
}

let server = SearchServer()
let searches = CoalescingQueue(name: "search")

print("Typing \"swift\", one letter at a time, while the first search runs:")
var typed: [(query: String, search: QueuedTask<[String]>)] = []
for query in ["s", "sw", "swi", "swif", "swift"] {
  typed.append((query, searches.enqueue { await server.search(query) }))
  print("  typed \"\(query)\"")
  // The first keystroke's search reaches the server before the next key is pressed.
  if query == "s" { while await !server.isHoldingFirst { await Task.yield() } }
}
await server.answerFirst()

print("What each keystroke got:")
for (query, search) in typed {
  switch await search.result {
  case .success(let results):
    print("  \"\(query)\": \(results.count) results: \(results.joined(separator: ", "))")
  case .failure(QueueError.superseded):
    print("  \"\(query)\": replaced by a newer query; never searched")
  case .failure(let error):
    print("  \"\(query)\": \(error)")
  }
}
print("The server received: \(await server.received.map { "\"\($0)\"" }.joined(separator: ", "))")
print(
  "Searches run: \(await server.received.count) of \(typed.count); the last query typed always runs."
)
