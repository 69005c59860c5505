import Dispatch
import Synchronization

// The alternatives Orderly is measured against, each named for where it comes from.

/// Seed 000's third serial queue ("SerialQueue3"), rebuilt faithfully as a baseline: an actor
/// holding `(job, continuation)` pairs typed through `Any`, drained by one `Task`.
///
/// The forced cast is the source's own; this is a measuring stick, not library code.
public actor Seed000SerialQueue {
  private var isExecuting = false
  private var taskQueue: [(() async throws -> Any, CheckedContinuation<Any, any Error>)] = []

  /// An empty queue.
  public init() {}

  /// Runs `task` after every task enqueued before it, and returns its result.
  public func enqueue<T>(_ task: @escaping @Sendable () async throws -> T) async throws -> T {
    let anyResult = try await withCheckedThrowingContinuation { continuation in
      let wrapped: () async throws -> Any = { try await task() as Any }
      taskQueue.append((wrapped, continuation))
      if !isExecuting {
        isExecuting = true
        Task { await processQueue() }
      }
    }
    // The source's own forced cast, kept so the baseline costs what the seed's queue costs.
    // swift-format-ignore: NeverForceUnwrap
    return anyResult as! T
  }

  private func processQueue() async {
    while !taskQueue.isEmpty {
      let (task, continuation) = taskQueue.removeFirst()
      do {
        let result = try await task()
        continuation.resume(returning: result)
      } catch {
        continuation.resume(throwing: error)
      }
    }
    isExecuting = false
  }
}

/// Seed 002's previous-task chain: each new `Task` awaits the one before it.
public actor Seed002TaskChain {
  private var previous: Task<Void, any Error>?

  /// An empty chain.
  public init() {}

  /// Starts a task that awaits the previous one, then runs `job`.
  public func add(_ job: @escaping @Sendable () async throws -> Void) {
    previous = Task { [previous] in
      _ = await previous?.result
      try await job()
    }
  }

  /// Waits for the last task added so far.
  public func waitForLast() async {
    _ = await previous?.result
  }
}

/// Counts events down to zero and resumes one waiter then.
public final class Countdown: Sendable {
  private let state: Mutex<(remaining: Int, waiter: CheckedContinuation<Void, Never>?)>

  /// A countdown from `count`.
  public init(_ count: Int) {
    state = Mutex((count, nil))
  }

  /// Counts one event; the last one resumes the waiter.
  public func tick() {
    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
      state.remaining -= 1
      guard state.remaining == 0 else { return nil }
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }

  /// Waits until the count reaches zero.
  public func wait() async {
    await withCheckedContinuation { continuation in
      let done = state.withLock { state -> Bool in
        if state.remaining <= 0 { return true }
        state.waiter = continuation
        return false
      }
      if done { continuation.resume() }
    }
  }
}

/// A one-shot latch that many tasks wait on; their continuations sit in a preallocated array,
/// so waiting adds no allocation of its own to a memory measurement.
public final class Latch: Sendable {
  private let state: Mutex<(open: Bool, waiters: [UnsafeContinuation<Void, Never>])>

  /// A closed latch with room for `capacity` waiters.
  public init(capacity: Int) {
    var waiters: [UnsafeContinuation<Void, Never>] = []
    waiters.reserveCapacity(capacity)
    state = Mutex((false, waiters))
  }

  /// The number of tasks waiting.
  public var waiterCount: Int { state.withLock { $0.waiters.count } }

  /// Waits until the latch opens.
  public func wait() async {
    await withUnsafeContinuation { continuation in
      let open = state.withLock { state -> Bool in
        if state.open { return true }
        state.waiters.append(continuation)
        return false
      }
      if open { continuation.resume() }
    }
  }

  /// Opens the latch and resumes every waiter.
  public func open() {
    let waiters = state.withLock { state in
      state.open = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// Waits for every block already sent to a serial `DispatchQueue`.
func drain(_ queue: DispatchQueue) async {
  await withCheckedContinuation { continuation in
    queue.async { continuation.resume() }
  }
}

/// The usual hand-written async semaphore: a count and a FIFO of continuations under a lock.
///
/// No cancellation support, as in most copies of the pattern; it only gates a `TaskGroup` here.
public final class BaselineSemaphore: Sendable {
  private let state: Mutex<(permits: Int, waiters: [UnsafeContinuation<Void, Never>])>

  /// A semaphore with `value` permits.
  public init(value: Int) {
    state = Mutex((value, []))
  }

  /// Takes a permit, waiting for one if none is left.
  public func wait() async {
    await withUnsafeContinuation { continuation in
      let ready = state.withLock { state -> Bool in
        if state.permits > 0 {
          state.permits -= 1
          return true
        }
        state.waiters.append(continuation)
        return false
      }
      if ready { continuation.resume() }
    }
  }

  /// Returns a permit, handing it to the first waiter if any.
  public func signal() {
    let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
      if state.waiters.isEmpty {
        state.permits += 1
        return nil
      }
      return state.waiters.removeFirst()
    }
    waiter?.resume()
  }
}
