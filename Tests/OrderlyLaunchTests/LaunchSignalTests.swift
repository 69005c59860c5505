import OrderlyCore
import OrderlyLaunch
import OrderlyTestSupport
import Testing

@Suite("LaunchSignal", .timeLimit(.minutes(1)))
struct LaunchSignalTests {
  @Test("firing before anyone waits works; firing again is ignored and keeps the first value")
  func fireFirst() async throws {
    let signal = LaunchSignal<Int>()
    #expect(signal.fire(1))
    #expect(!signal.fire(2))
    #expect(try await signal.wait() == 1)
    #expect(try await signal.wait() == 1)
  }

  @Test("every waiter is resumed with the value")
  func manyWaiters() async throws {
    let signal = LaunchSignal<String>()
    let waiters = (0..<10).map { _ in Task { try await signal.wait() } }
    await Task.yield()
    signal.fire("unlocked")
    for waiter in waiters { #expect(try await waiter.value == "unlocked") }
  }

  @Test("a cancelled waiter throws at once; the others still get the value")
  func cancellation() async throws {
    let signal = LaunchSignal<Void>()
    let cancelled = Task { try await signal.wait() }
    let other = Task { try await signal.wait() }
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    signal.fire()
    try await other.value
  }

  @Test("a task already cancelled throws, unless the signal has fired")
  func alreadyCancelled() async throws {
    let signal = LaunchSignal<Void>()
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await signal.wait()
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    signal.fire()
    let late = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await signal.wait()
    }
    try await late.value
  }

  @Test("500 waiters, random cancellation, one fire: every waiter resumes exactly once")
  func stress() async throws {
    let signal = LaunchSignal<Int>()
    var generator = SeededGenerator(seed: 3)
    var tasks: [(Task<Int, any Error>, Bool)] = []
    for _ in 0..<500 {
      let task = Task { try await signal.wait() }
      let cancel = generator.next() % 3 == 0
      if cancel { task.cancel() }
      tasks.append((task, cancel))
    }
    signal.fire(7)
    for (task, _) in tasks {
      switch await task.result {
      case .success(let value): #expect(value == 7)
      case .failure(let error): #expect(error is CancellationError)
      }
    }
  }
}
