/// The app's server, as the screens call it: every call suspends until the test (or the
/// network) lets it answer, so later calls could answer first if nothing kept them in order.
actor NotesServer {
  typealias Answer = @Sendable (String) async -> Void

  private var stored: [String] = []
  private let answer: Answer

  /// - Parameter answer: Awaited inside every call before it answers; by default it returns at
  ///   once.
  init(answer: @escaping Answer = { _ in }) {
    self.answer = answer
  }

  func store(_ text: String) async {
    await answer(text)
    stored.append(text)
  }

  func search(_ query: String) async throws -> [String] {
    await answer(query)
    try Task.checkCancellation()
    return stored.filter { $0.contains(query) }
  }

  var all: [String] { stored }
}
