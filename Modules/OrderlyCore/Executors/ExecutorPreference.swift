/// How a queue starts its tasks when it was given a task executor.
///
/// Task executors (`TaskExecutor`, `Task(executorPreference:)`) need macOS 15 / iOS 18 /
/// tvOS 18 / watchOS 11 / visionOS 2, and a stored property cannot have a type that is only
/// available on newer systems than the package's floor. A queue therefore stores this protocol,
/// which has no availability of its own; its one conforming type, ``TaskExecutorPreference``,
/// can only be made where task executors exist.
protocol ExecutorPreference: Sendable {
  /// Starts an unstructured task that prefers the executor, like
  /// `Task(executorPreference:priority:operation:)`.
  func task<Success: Sendable>(
    priority: TaskPriority?,
    operation: sending @escaping () async throws -> Success
  ) -> Task<Success, any Error>

  /// Starts a detached task that prefers the executor, like
  /// `Task.detached(executorPreference:priority:operation:)`.
  func detached(priority: TaskPriority?, operation: sending @escaping () async -> Void)

  /// Runs `operation` in the current task with the executor preferred, like
  /// `withTaskExecutorPreference(_:isolation:operation:)`.
  func run<Success>(
    isolation: isolated (any Actor)?,
    operation: () async throws -> Success
  ) async throws -> Success
}

/// An ``ExecutorPreference`` for a task executor.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
struct TaskExecutorPreference: ExecutorPreference {
  let executor: any TaskExecutor

  func task<Success: Sendable>(
    priority: TaskPriority?,
    operation: sending @escaping () async throws -> Success
  ) -> Task<Success, any Error> {
    Task(executorPreference: executor, priority: priority, operation: operation)
  }

  func detached(priority: TaskPriority?, operation: sending @escaping () async -> Void) {
    Task.detached(executorPreference: executor, priority: priority, operation: operation)
  }

  func run<Success>(
    isolation: isolated (any Actor)?,
    operation: () async throws -> Success
  ) async throws -> Success {
    try await withTaskExecutorPreference(executor, isolation: isolation, operation: operation)
  }
}
