import OrderlyCore
import OrderlyTestSupport

/// An error with a value, to check that errors reach awaiters unchanged.
struct TestError: Error, Equatable {
  let code: Int
}

/// Whether awaiting `job` ends with `CancellationError`.
func endsCancelled<Success>(_ job: QueuedTask<Success>) async -> Bool {
  if case .failure(let error) = await job.result { return error is CancellationError }
  return false
}

/// A queue held busy by an async detached job waiting at `release`, once that job is known to
/// be running.
func busyQueue(_ kind: QueueKind, name: String = "busy", release: Gate) async throws -> TestQueue {
  let queue = kind.make(name: name)
  let started = Gate()
  queue.enqueueDetached {
    started.open()
    try await release.wait()
  }
  try await started.wait()
  return queue
}

/// A task-local value for the inheritance tests.
enum Trace {
  @TaskLocal static var label: String?
}

extension AsyncStream<QueueEvent>.Iterator {
  /// Reads events until `count` of them match `kind`, and returns the last one read.
  @discardableResult
  mutating func skip(
    to count: Int = 1,
    where matches: (QueueEvent.Kind) -> Bool
  ) async -> QueueEvent? {
    var seen = 0
    while let event = await next() {
      if matches(event.kind) {
        seen += 1
        if seen == count { return event }
      }
    }
    return nil
  }
}

func isEnqueued(_ kind: QueueEvent.Kind) -> Bool {
  if case .enqueued = kind { return true }
  return false
}

func isCancelled(_ kind: QueueEvent.Kind) -> Bool {
  if case .cancelled = kind { return true }
  return false
}
