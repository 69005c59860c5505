// The source's serial queue, rebuilt in its three versions: an actor that holds a list of
// jobs and a loop that runs them one by one. Each version fixes one gap and leaves others.
import OrderlyExampleSupport

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

let service = SlowNotesService(failing: [5])

print("Version 1: in order, but a job can return neither its answer nor its error.")
let log1 = ScenarioLog()
let queue1 = NaiveQueue1()
for task in ScenarioTask.seven {
  log1.start(task)
  await queue1.enqueue { _ = try? await service.perform(task) }
  log1.finish(task, answer: "done, as far as the caller can tell")
}
print("  Task 5 was rejected by the service, yet its caller saw it finish.")

print("Version 3, seven Task {} calls: results and errors come back, typed through Any.")
let log3 = ScenarioLog()
let queue3 = NaiveQueue3()
var tasks: [Task<Void, Never>] = []
for task in ScenarioTask.seven {
  tasks.append(
    Task {
      log3.start(task)
      do {
        let answer = try await queue3.enqueue { try await service.perform(task) }
        log3.finish(task, answer: answer)
      } catch {
        log3.fail(task, error: error)
      }
    }
  )
}
for task in tasks { await task.value }
print("Verdict: \(log3.verdict)")
print("  Each Task {} reaches the actor when it gets to run, so the line follows that order,")
print("  not the order of the calls in the code.")

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
