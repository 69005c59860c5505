import Observation
import OrderlyTaskStore

/// A search screen's model: each of a `TaskStore`'s policies, from main-actor code.
@Observable
final class SearchModel {
  /// `nonisolated`: in a target whose default isolation is the main actor, a key type would
  /// otherwise get a main-actor `Hashable` conformance, which a `TaskStore` key (`Hashable &
  /// Sendable`, used from whatever actor owns the store) cannot use.
  nonisolated enum TaskKey: Hashable, Sendable {
    case search, save, refresh, preview, load, upload
  }

  private(set) var results: [String] = []
  private(set) var log: [String] = []
  private let tasks = TaskStore<TaskKey>()
  private let server: NotesServer

  init(server: NotesServer) {
    self.server = server
  }

  var isSearching: Bool { tasks.isRunning(forKey: .search) }

  /// Search as you type: a new query cancels the one running.
  @discardableResult
  func queryChanged(_ query: String) -> TaskStoreTask<Void> {
    tasks.addTask(forKey: .search, policy: .cancelPrevious) { [weak self, server] in
      let found = try await server.search(query)
      self?.results = found
    }
  }

  /// Saves run one after another, in the order asked.
  @discardableResult
  func save(_ text: String) -> TaskStoreTask<Void> {
    tasks.addTask(forKey: .save, policy: .enqueue) { [weak self, server] in
      await server.store(text)
      self?.log.append("saved \(text)")
    }
  }

  /// Pull to refresh: a second pull while one runs is dropped.
  @discardableResult
  func refresh(_ label: String) -> TaskStoreTask<Void> {
    tasks.addTask(forKey: .refresh, policy: .dropNew) { [weak self, server] in
      _ = try await server.search("")
      self?.log.append("refreshed \(label)")
    }
  }

  /// A preview of the latest selection only: waiting ones are replaced by the newest.
  @discardableResult
  func preview(_ label: String) -> TaskStoreTask<Void> {
    tasks.addTask(forKey: .preview, policy: .keepLatest) { [weak self, server] in
      _ = try await server.search(label)
      self?.log.append("previewed \(label)")
    }
  }

  /// Every caller of a load shares the one running.
  func load() -> TaskStoreTask<Int> {
    tasks.addTask(forKey: .load, policy: .joinExisting) { [server] in
      await server.all.count
    }
  }

  /// Uploads, two at a time; one cancels and replaces the previous one after it has stopped.
  @discardableResult
  func upload(_ label: String, replacing: Bool = false) -> TaskStoreTask<Void> {
    let policy: TaskStorePolicy = replacing ? .cancelPreviousAndWait : .concurrent(limit: 2)
    return tasks.addTask(forKey: .upload, policy: policy) { [weak self, server] in
      await server.store(label)
      self?.log.append("uploaded \(label)")
    }
  }

  func runningCount(_ key: TaskKey) -> Int { tasks.runningCount(forKey: key) }
  func queuedCount(_ key: TaskKey) -> Int { tasks.queuedCount(forKey: key) }
}
