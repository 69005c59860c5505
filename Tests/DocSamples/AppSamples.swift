// The code the OrderlyLaunch, OrderlyTaskStore and OrderlySQLite documentation shows, compiled
// by `swift build`; docs-gen copies each sample into its `orderly:sample` region.
// sample: task-store-overview
import Observation
// end sample
// sample: launch-overview, launch-minimal-step, launch-waiting-step
import OrderlyLaunch
// end sample
// sample: sqlite-overview
import OrderlyRepository
import OrderlySQLite
// end sample
// sample: task-store-overview
import OrderlyTaskStore
// end sample

/// The launch screen the samples take down.
@MainActor enum LaunchScreen {
  static func remove() {}
}

/// The passcode prompt the samples wait for.
@MainActor final class PasscodePrompt {
  var onUnlock: (() -> Void)?
  func dismiss() {}
}

@MainActor func present(_ prompt: PasscodePrompt) {}

// sample: launch-minimal-step
struct RemoveLaunchScreenStep: LaunchStep {
  func run() async { LaunchScreen.remove() }
}
// end sample

/// A step that waits for the user, as the article shows it.
struct PasscodeStep: LaunchStep {
  let prompt: PasscodePrompt

  // sample: launch-waiting-step
  func run() async {
    let unlocked = LaunchSignal<Void>()
    prompt.onUnlock = { unlocked.fire() }
    present(prompt)
    do {
      try await unlocked.wait()
    } catch {
      prompt.dismiss()  // the launch was cancelled while the prompt was up
    }
  }
  // end sample
}

@MainActor func launchOverview(prompt: PasscodePrompt) {
  // sample: launch-overview
  let sequencer = LaunchSequencer()
  sequencer.enqueue(PasscodeStep(prompt: prompt))
  sequencer.enqueue(RemoveLaunchScreenStep())
  // end sample
}

// sample: task-store-overview
@MainActor @Observable final class SearchModel {
  nonisolated enum TaskKey { case search }  // nonisolated: see below
  private let tasks = TaskStore<TaskKey>()
  private let service = SearchService()
  var results: [String] = []

  var isSearching: Bool { tasks.isRunning(forKey: .search) }

  func queryChanged(_ query: String) {
    // [weak self]: a search still running does not keep a closed screen's model alive;
    // releasing the model releases the store, which cancels the search.
    tasks.addTask(forKey: .search, policy: .cancelPrevious) { [weak self, service] in
      let found = try await service.search(query)
      self?.results = found
    }
  }
}
// end sample

/// The slow search the sample calls.
struct SearchService: Sendable {
  func search(_ query: String) async throws -> [String] { [] }
}

func sqliteOverview() async throws {
  // sample: sqlite-overview
  let service = try SQLiteNotesService(path: "/path/to/notes.sqlite")
  let repository = NotesRepository(service: service)
  try await repository.create(title: "milk")
  // end sample
}
