import Testing

@testable import OrderlyCore

/// The queues that must behave exactly like a serial queue; the serial suites run on each.
enum QueueKind: CaseIterable, Sendable, CustomTestStringConvertible {
  case serial
  case concurrentLimitOne

  var testDescription: String {
    switch self {
    case .serial: "SerialQueue"
    case .concurrentLimitOne: "ConcurrentQueue(limit: 1)"
    }
  }

  func make(name: String? = nil) -> TestQueue {
    switch self {
    case .serial: .serial(name.map { SerialQueue(name: $0) } ?? SerialQueue())
    case .concurrentLimitOne:
      .concurrent(name.map { ConcurrentQueue(name: $0, limit: 1) } ?? ConcurrentQueue(limit: 1))
    }
  }
}

/// One of the serial-behaving queues, with the API the shared suites use.
enum TestQueue: Sendable {
  case serial(SerialQueue)
  case concurrent(ConcurrentQueue)

  var core: JobQueueCore {
    switch self {
    case .serial(let queue): queue.core
    case .concurrent(let queue): queue.core
    }
  }

  var name: String { core.name }
  var pendingCount: Int { core.pendingCount }
  var isIdle: Bool { core.isIdle }
  var events: AsyncStream<QueueEvent> { core.events }

  func cancelAll() {
    core.cancelAll()
  }

  @discardableResult
  func enqueue<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    switch self {
    case .serial(let queue):
      queue.enqueue(name: name, priority: priority, isolation: isolation, operation: operation)
    case .concurrent(let queue):
      queue.enqueue(name: name, priority: priority, isolation: isolation, operation: operation)
    }
  }

  @discardableResult
  func enqueueDetached<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    switch self {
    case .serial(let queue):
      queue.enqueueDetached(name: name, priority: priority, operation: operation)
    case .concurrent(let queue):
      queue.enqueueDetached(name: name, priority: priority, operation: operation)
    }
  }

  /// The synchronous overload: the runner calls the job with no async frame.
  @discardableResult
  func enqueueDetachedSynchronously<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    operation: sending @escaping () throws -> Success
  ) -> QueuedTask<Success> {
    switch self {
    case .serial(let queue):
      queue.enqueueDetached(name: name, priority: priority, operation: operation)
    case .concurrent(let queue):
      queue.enqueueDetached(name: name, priority: priority, operation: operation)
    }
  }

  /// The lane for work with no handle (`execute(_:)`).
  func execute(_ work: sending @escaping () -> Void) {
    switch self {
    case .serial(let queue): queue.execute(work)
    case .concurrent(let queue): queue.execute(work)
    }
  }

  func enqueueAndWait<Success>(
    name: String? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Success
  ) async throws -> Success {
    switch self {
    case .serial(let queue):
      try await queue.enqueueAndWait(name: name, isolation: isolation, operation: operation)
    case .concurrent(let queue):
      try await queue.enqueueAndWait(name: name, isolation: isolation, operation: operation)
    }
  }

  func waitUntilIdle(isolation: isolated (any Actor)? = #isolation) async throws {
    switch self {
    case .serial(let queue): try await queue.waitUntilIdle(isolation: isolation)
    case .concurrent(let queue): try await queue.waitUntilIdle(isolation: isolation)
    }
  }
}
