internal import OrderlyCore

/// One line of an ``ActivityLog``: a call started, finished, or failed.
public struct ActivityEntry: Sendable, Equatable, CustomStringConvertible {
  /// What happened to the call.
  public enum Kind: Sendable, Equatable {
    /// The call started running.
    case start
    /// The call returned; the text summarizes the answer, such as `3 notes`.
    case finish(String)
    /// The call failed; the text describes the error.
    case error(String)
  }

  /// The call's number: calls are numbered in the order they were made.
  public let call: Int
  /// The operation the call performs.
  public let operation: NotesOperation
  /// What happened.
  public let kind: Kind
  /// When it happened, measured from the log's start, if the log keeps time.
  public let elapsed: Duration?

  /// Creates an entry.
  ///
  /// - Parameters:
  ///   - call: The call's number.
  ///   - operation: The call's operation.
  ///   - kind: What happened.
  ///   - elapsed: When it happened, from the log's start; `nil` if unknown.
  public init(call: Int, operation: NotesOperation, kind: Kind, elapsed: Duration? = nil) {
    self.call = call
    self.operation = operation
    self.kind = kind
    self.elapsed = elapsed
  }

  /// A line such as `finish 4 fetchNotes: 3 notes`.
  public var description: String {
    switch kind {
    case .start: "start \(call) \(operation)"
    case .finish(let summary): "finish \(call) \(operation): \(summary)"
    case .error(let message): "error \(call) \(operation): \(message)"
    }
  }
}

/// The "UI messages" of the serial task executor article: for each call, a numbered start entry, then a finish or an
/// error entry, in the order they happened.
///
/// Read it as a list with ``entries``, or follow it as an `AsyncSequence` with ``updates``.
public final class ActivityLog: Sendable {
  private struct State {
    var entries: [ActivityEntry] = []
    var followers: [UInt64: AsyncStream<ActivityEntry>.Continuation] = [:]
    var lastFollower: UInt64 = 0
  }

  private let state = OrderlyLock(State())
  private let elapsed: (@Sendable () -> Duration)?

  /// Creates an empty log that does not keep time.
  public init() {
    elapsed = nil
  }

  /// Creates an empty log that stamps each entry with the time since now on `clock`.
  ///
  /// - Parameter clock: The clock to measure with.
  public init<C: Clock>(clock: C) where C.Duration == Duration {
    let origin = clock.now
    elapsed = { origin.duration(to: clock.now) }
  }

  deinit {
    state.withLock(announcingTo: self) { state in
      for follower in state.followers.values { follower.finish() }
    }
  }

  /// Every entry so far, in order.
  public var entries: [ActivityEntry] {
    state.withLock(announcingTo: self) { $0.entries }
  }

  /// Every entry so far, then each new one as it is written; ends when the log is freed.
  ///
  /// Each read starts an independent follower.
  public var updates: AsyncStream<ActivityEntry> {
    let (stream, continuation) = AsyncStream.makeStream(of: ActivityEntry.self)
    state.withLock(announcingTo: self) { state in
      for entry in state.entries { continuation.yield(entry) }
      state.lastFollower += 1
      state.followers[state.lastFollower] = continuation
    }
    return stream
  }

  /// Writes an entry, stamping it with the log's time if it keeps time and the entry has none.
  ///
  /// - Parameter entry: The entry to append.
  public func write(_ entry: ActivityEntry) {
    var entry = entry
    if entry.elapsed == nil, let elapsed {
      entry = ActivityEntry(
        call: entry.call,
        operation: entry.operation,
        kind: entry.kind,
        elapsed: elapsed()
      )
    }
    state.withLock(announcingTo: self) { state in
      state.entries.append(entry)
      for (token, follower) in state.followers {
        if case .terminated = follower.yield(entry) { state.followers[token] = nil }
      }
    }
  }

  /// Runs a call, writing its start, then its finish (with a summary of the answer) or its
  /// error.
  ///
  /// - Parameters:
  ///   - operation: The operation the call performs.
  ///   - call: The call's number.
  ///   - summary: Turns the answer into the text of the finish entry.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - body: The call.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` threw, after writing it as an error entry.
  public func track<Answer>(
    _ operation: NotesOperation,
    call: Int,
    summary: (Answer) -> String,
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> Answer
  ) async throws -> Answer {
    write(ActivityEntry(call: call, operation: operation, kind: .start))
    do {
      let answer = try await body()
      write(ActivityEntry(call: call, operation: operation, kind: .finish(summary(answer))))
      return answer
    } catch {
      write(ActivityEntry(call: call, operation: operation, kind: .error("\(error)")))
      throw error
    }
  }
}

/// Whether the calls in a log ended in the order they were made.
public enum OrderVerdict: Sendable, Equatable, CustomStringConvertible {
  /// Every call ended after every call made before it.
  case inOrder
  /// The first call found to end before an earlier call had ended.
  case outOfOrder(finished: Int, before: Int)

  /// `in order`, or `out of order: task 3 finished before task 2`.
  public var description: String {
    switch self {
    case .inOrder: "in order"
    case .outOfOrder(let finished, let before):
      "out of order: task \(finished) finished before task \(before)"
    }
  }
}

extension ActivityLog {
  /// Whether the logged calls ended in call-number order.
  ///
  /// A call "ends" with its finish or error entry. The log is out of order at the first end of a
  /// call while a lower-numbered call in the log has not ended yet.
  public var verdict: OrderVerdict {
    Self.verdict(of: entries)
  }

  /// The verdict on a list of entries (see ``verdict``).
  package static func verdict(of entries: [ActivityEntry]) -> OrderVerdict {
    let calls = Set(entries.map(\.call))
    var ended: Set<Int> = []
    for entry in entries where entry.kind != .start {
      if let earlier = calls.filter({ $0 < entry.call && !ended.contains($0) }).min() {
        return .outOfOrder(finished: entry.call, before: earlier)
      }
      ended.insert(entry.call)
    }
    return .inOrder
  }
}
