import Observation
import OrderlyCore

/// A notes screen's model, main-actor isolated by the target's default: every tap saves through
/// one `SerialQueue`, so the server sees the saves in the order the user made them, and the
/// screen's list follows that order.
@Observable
final class NotesModel {
  private(set) var saved: [String] = []
  private let saves = SerialQueue(name: "saves")
  private let server: NotesServer

  init(server: NotesServer) {
    self.server = server
  }

  /// Saves a note; called from a button, synchronously, on the main actor.
  ///
  /// The save takes its place in line before this returns; the job runs on the main actor, as
  /// `Task {}` would.
  func save(_ text: String) {
    saves.enqueue { [server] in
      await server.store(text)
      self.saved.append(text)
    }
  }

  /// A read that must see every save made before it: it waits for its turn in the same line.
  func reload() async throws -> [String] {
    try await saves.enqueueAndWait { [server] in await server.all }
  }

  func waitForSaves() async throws {
    try await saves.waitUntilIdle()
  }
}
