/// A one-way door that tasks wait at until a test opens it.
///
/// Use a gate to hold a job at a known point, and to learn that a job reached a point, without
/// sleeping:
///
/// ```swift
/// let started = Gate(), release = Gate()
/// queue.enqueue {
///   started.open()
///   try await release.wait()
/// }
/// try await started.wait()   // the job is running now
/// release.open()             // let it finish
/// ```
///
/// Once open, a gate stays open: every later ``wait(isolation:)`` returns at once. Safe to use from any
/// thread or task.
public final class Gate: Sendable {
  private let door: ConditionWaiters<Bool>

  /// Creates a gate.
  ///
  /// - Parameter isOpen: Whether the gate starts open; closed by default.
  public init(isOpen: Bool = false) {
    door = ConditionWaiters(isOpen)
  }

  /// Opens the gate for good, resuming every task waiting at it.
  ///
  /// Opening twice is harmless.
  public func open() {
    door.update { $0 = true }
  }

  /// Whether the gate has been opened.
  public var isOpen: Bool {
    door.read { $0 }
  }

  /// The number of tasks waiting at the gate now.
  public var waiterCount: Int {
    door.waiterCount
  }

  /// Waits until at least `count` tasks are waiting at the gate, so a test knows they are held.
  ///
  /// - Parameters:
  ///   - count: The number of waiting tasks to wait for.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func waitForWaiters(
    _ count: Int,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    try await door.waitForWaiters(count)
  }

  /// Waits until the gate is open; returns at once if it is open already.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled while the gate is closed. The task
  ///   leaves the gate at once.
  public func wait(isolation: isolated (any Actor)? = #isolation) async throws {
    try await door.wait { $0 }
  }
}
