/// A thread-safe list that keeps values in the order they were recorded.
///
/// Jobs record what they do; the test waits for the expected count and asserts the order:
///
/// ```swift
/// let recorder = OrderedRecorder<Int>()
/// for index in 1...3 { queue.enqueue { recorder.record(index) } }
/// try await recorder.waitForCount(3)
/// #expect(recorder.values == [1, 2, 3])
/// ```
public final class OrderedRecorder<Element: Sendable>: Sendable {
  private let list: ConditionWaiters<[Element]>

  /// Creates an empty recorder.
  public init() {
    list = ConditionWaiters([])
  }

  /// Appends a value.
  ///
  /// Values recorded from one task keep that task's order; values from
  /// concurrent tasks are kept in the order the calls took the recorder's lock.
  ///
  /// - Parameter element: The value to record.
  public func record(_ element: Element) {
    list.update { $0.append(element) }
  }

  /// Every value recorded so far, oldest first.
  public var values: [Element] {
    list.read { $0 }
  }

  /// The number of values recorded so far.
  public var count: Int {
    list.read { $0.count }
  }

  /// Waits until at least `count` values have been recorded.
  ///
  /// - Parameters:
  ///   - count: The number of values to wait for.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func waitForCount(
    _ count: Int,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    try await list.wait { $0.count >= count }
  }
}
