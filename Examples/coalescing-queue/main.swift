// Search as you type: "swift" typed one letter at a time while the first search runs. A
// CoalescingQueue runs the search in progress, then only the newest query; the queries typed in
// between are replaced and never reach the server.
// course: the queue
import OrderlyCore
import OrderlyCourse

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
// course end: the queue

// The same typing on the clock: a key every 40 ms; the first search takes 200 ms, the others
// 60 ms, all on a story clock, which moves to the next event once the typist and the search in
// flight wait on it, so every run prints the same times.
print("")
print("On the clock: a key every 40 ms; the first search takes 200 ms, a later one 60 ms:")
let story = StoryClock()
let clocked = CoalescingQueue(name: "clocked search")
let queries = ["s", "sw", "swi", "swif", "swift"]
/// The typist: a key every 40 ms of the story's time; each keystroke enqueues its search.
let typist = Task {
  var keystrokes: [StoryClock.Instant] = []
  var handles: [QueuedTask<Void>] = []
  for (index, query) in queries.enumerated() {
    let number = index + 1
    let typed = index == 0 ? story.now : try await story.work(for: .milliseconds(40))
    keystrokes.append(typed)
    handles.append(
      clocked.enqueue {
        story.record(.start, number, "search \"\(query)\"")
        let end = try await story.work(for: .milliseconds(number == 1 ? 200 : 60))
        story.record(.finish, number, "search \"\(query)\": answered", at: end)
      }
    )
    if index > 0 { story.record(.waiting, number, "search \"\(query)\"", at: typed) }
  }
  return (keystrokes, handles)
}
// The typist and the first search wait on the clock until the last key (160 ms); then the
// first search ends (200 ms) and lets the newest query start, which ends 60 ms later.
for _ in 1...4 { try await story.advance(whenSleeping: 2) }
let (keystrokes, handles) = try await typist.value
for _ in 1...2 { try await story.advance(whenSleeping: 1) }
for (index, handle) in handles.enumerated() {
  if case .failure(QueueError.superseded) = await handle.result, index + 1 < keystrokes.count {
    // Replaced when the next key was typed.
    story.record(
      .dropped,
      index + 1,
      "search \"\(queries[index])\": replaced by \"\(queries[index + 1])\"",
      at: keystrokes[index + 1]
    )
  }
}
for line in story.lines { print("  \(line)") }
print("  (the search in flight runs to its end; of the queries typed meanwhile, the newest runs)")
