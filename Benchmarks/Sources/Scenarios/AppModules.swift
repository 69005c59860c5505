import OrderlyLaunch
import OrderlyTaskStore

/// A launch step that does nothing: what is measured is the sequencer around it.
@MainActor struct NoOpStep: LaunchStep {
  let id: String
  func run() async {}
}

/// `jobs` tasks added under one key with `.enqueue` and run, one after another, on the main
/// actor: the store's bookkeeping, its `Task` per task and the handle's `value`.
@MainActor func taskStoreAddedAndRun(_ jobs: Int) async throws -> Double {
  try await nanosecondsPerJob(jobs) {
    let store = TaskStore<Int>()
    for _ in 0..<jobs { try await store.addTask(forKey: 0, policy: .enqueue) {}.value }
  }
}

/// The same work with a bare `Task {}` per task, awaited, on the main actor.
@MainActor func mainActorTaskAwaited(_ jobs: Int) async throws -> Double {
  await nanosecondsPerJob(jobs) {
    for _ in 0..<jobs { await Task {}.value }
  }
}

/// `jobs` launch steps enqueued and run, each awaited until the sequencer is idle again.
@MainActor func launchStepEnqueuedAndRun(_ jobs: Int) async throws -> Double {
  await nanosecondsPerJob(jobs) {
    let sequencer = LaunchSequencer(deduplication: .none)
    for index in 0..<jobs {
      sequencer.enqueue(NoOpStep(id: "\(index)"))
      await sequencer.waitUntilIdle()
    }
  }
}

/// The app modules: what a task added to a `TaskStore` and a launch step cost, against a bare
/// main-actor `Task {}`.
public let appModuleScenarios: [Scenario] = [
  Scenario(
    name: "TaskStore: a task added (.enqueue) and run",
    baselineName: "a main-actor Task {} created and awaited",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (20_000, 5_000),
    orderly: { jobs in try await taskStoreAddedAndRun(jobs) },
    baseline: { jobs in try await mainActorTaskAwaited(jobs) }
  ),
  Scenario(
    name: "LaunchSequencer: a step enqueued and run",
    baselineName: "a main-actor Task {} created and awaited",
    unit: .nanosecondsPerJob,
    target: .info,
    jobs: (20_000, 5_000),
    orderly: { jobs in try await launchStepEnqueuedAndRun(jobs) },
    baseline: { jobs in try await mainActorTaskAwaited(jobs) }
  ),
]
