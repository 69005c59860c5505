// The source's serial queue, rebuilt in its three versions: an actor that holds a list of
// jobs and a loop that runs them one by one. Each version fixes one gap and leaves others.
import OrderlyCourse
import OrderlyRepository

/// Version 1: runs jobs in order, but a job cannot report an error.
actor NaiveQueue1 {
  private var isRunning = false
  private var jobs: [(job: () async -> Void, done: CheckedContinuation<Void, Never>)] = []

  func enqueue(_ job: @escaping @Sendable () async -> Void) async {
    await withCheckedContinuation { done in
      jobs.append((job, done))
      if !isRunning {
        isRunning = true
        Task { await drain() }
      }
    }
  }

  private func drain() async {
    while !jobs.isEmpty {
      let next = jobs.removeFirst()
      await next.job()
      next.done.resume()
    }
    isRunning = false
  }
}

/// Version 3 (version 2 only added the error path): results pass through `Any`.
actor NaiveQueue3 {
  struct WrongType: Error {}
  private var isRunning = false
  private var jobs: [(job: () async throws -> Any, done: CheckedContinuation<Any, any Error>)] = []

  func enqueue<T>(_ job: @escaping @Sendable () async throws -> T) async throws -> T {
    let result = try await withCheckedThrowingContinuation { done in
      jobs.append(({ try await job() as Any }, done))
      if !isRunning {
        isRunning = true
        Task { await drain() }
      }
    }
    // The source force-casts here; the type is only checked at run time either way.
    guard let typed = result as? T else { throw WrongType() }
    return typed
  }

  private func drain() async {
    while !jobs.isEmpty {
      let next = jobs.removeFirst()
      do { next.done.resume(returning: try await next.job()) } catch {
        next.done.resume(throwing: error)
      }
    }
    isRunning = false
  }
}

let scenario = NotesScenario(
  seed: 3,
  latency: .milliseconds(20) ... .milliseconds(380),
  failingCall: 5
)

// `--from-tasks`: version 1's calls come from a Task {} each, as an app's would (the first
// exercise of the lesson).
let fromTasks = CommandLine.arguments.dropFirst().contains("--from-tasks")
print("Version 1: in order, but a job can return neither its answer nor its error.")
if fromTasks { print("  (--from-tasks: each call from a Task {} of its own)") }
// Told on a story clock: each call takes its latency of the story's time, and the story moves
// the clock to the call's end once it waits, so the times are the same on every run.
let story = StoryClock()
let service1 = NotesScenario(
  seed: scenario.seed,
  latency: scenario.latency,
  failingCall: scenario.failingCall,
  clock: story
).makeService()
let log1 = ActivityLog(clock: story)
let queue1 = NaiveQueue1()
let (ends, ended) = AsyncStream.makeStream(of: Void.self)
let teller = Task {
  // One call at a time runs: the clock moves to its end, then on to the next call's.
  var endings = ends.makeAsyncIterator()
  for _ in 1...7 {
    try await story.advance(whenSleeping: 1)
    _ = await endings.next()
  }
}
if fromTasks {
  // Each task does a moment of other work first, as tasks in an app do: the later the call in
  // the code, the less work (50 ms apart), so the tasks reach the queue in the other order.
  let tasks = (1...7).map { call in
    Task {
      try? await Task.sleep(for: .milliseconds(50 * (7 - call)))
      await queue1.enqueue {
        _ = try? await service1.perform(call, log: log1)
        ended.yield()
      }
    }
  }
  for task in tasks { await task.value }
} else {
  for call in 1...7 {
    await queue1.enqueue {
      _ = try? await service1.perform(call, log: log1)
      ended.yield()
    }
  }
}
try await teller.value
for entry in log1.entries {
  let milliseconds = "\(Int((entry.elapsed ?? .zero) / .milliseconds(1)))"
  print(
    "  [\(String(repeating: " ", count: max(0, 4 - milliseconds.count)))\(milliseconds) ms] \(entry)"
  )
}
print("Verdict: \(log1.verdict)")
print("  Call 5 failed, yet its caller saw its enqueue return like every other.")

print("Version 3: results and errors come back to the caller, typed through Any.")
let service3 = scenario.makeService()
let log3 = ActivityLog()
let queue3 = NaiveQueue3()
for call in [4, 5] {
  do {
    let answer: String = try await queue3.enqueue { try await service3.perform(call, log: log3) }
    print("  call \(call) returned \"\(answer)\" (cast back from Any at run time)")
  } catch {
    print("  call \(call) threw: \(error)")
  }
}
print("  Its enqueue is an actor method, so code outside the actor needs a Task {} per call, and")
print("  those tasks reach the actor in whatever order they get to run: the order is lost again.")

print("Cancelling a caller does not take its job out of version 3's line:")
let gate = Task { try await queue3.enqueue { try await Task.sleep(for: .milliseconds(50)) } }
let cancelled = Task { try await queue3.enqueue { "ran anyway" } }
cancelled.cancel()
_ = try? await gate.value
print("  cancelled caller got: \(String(describing: try? await cancelled.value))")

print("Waiting on the same queue from inside a job hangs for good:")
let nested = Task { try await queue3.enqueue { try await queue3.enqueue { 1 } } }
try await Task.sleep(for: .milliseconds(200))
print("  still waiting after 200 ms: deadlocked (SerialQueue throws reentrantWait instead)")
nested.cancel()
