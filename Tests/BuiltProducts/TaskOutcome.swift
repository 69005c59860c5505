/// What `task` returned, or `nil` if it had not ended `limit` (real time) after this call.
///
/// For a test whose failure would be a task that waits for ever: the task is left running, and
/// the test fails its expectation instead of holding the whole test run. Time decides nothing
/// else: a task that ends, ends with its own value.
///
/// - Parameters:
///   - task: The task to wait for.
///   - limit: How long to wait; a minute by default.
/// - Returns: Its value, or `nil` if it was still running.
public func outcome<Value: Sendable>(
  of task: Task<Value, Never>,
  within limit: Duration = .seconds(60)
) async -> Value? {
  let (stream, continuation) = AsyncStream.makeStream(of: Value?.self)
  let watcher = Task { continuation.yield(await task.value) }
  let timer = Task {
    try? await Task.sleep(for: limit)
    continuation.yield(nil)
  }
  var first: Value?
  for await value in stream {
    first = value
    break
  }
  continuation.finish()
  timer.cancel()
  _ = watcher
  return first
}
