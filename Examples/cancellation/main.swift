// Every way an Orderly job can be cancelled, and what whoever awaits it sees. An
// AsyncSemaphore(value: 0) serves as a gate that holds a job until it is signalled.
import OrderlyCore
import Synchronization

func describe<T>(_ result: Result<T, any Error>) -> String {
  switch result {
  case .success(let value): "returned \(value)"
  case .failure(let error) where error is CancellationError: "threw CancellationError"
  case .failure(let error): "threw \(error)"
  }
}

/// A queue held busy by a job that waits at `gate`, once that job is known to be running.
func busyQueue(_ name: String, gate: AsyncSemaphore) async throws -> SerialQueue {
  let queue = SerialQueue(name: name)
  let started = AsyncSemaphore(value: 0)
  queue.enqueueDetached {
    started.signal()
    try await gate.waitUnlessCancelled()
  }
  await started.wait()
  return queue
}

print("1. A pending job cancelled through its handle")
do {
  let gate = AsyncSemaphore(value: 0)
  let queue = try await busyQueue("one", gate: gate)
  let job = queue.enqueue { "ran" }
  job.cancel()
  print("   its awaiter \(describe(await job.result)) at once, while the queue is still busy")
  gate.signal()
}

print("2. A running job cancelled through its handle")
do {
  let queue = SerialQueue(name: "two")
  let gate = AsyncSemaphore(value: 0)
  let job = queue.enqueue {
    try? await gate.waitUnlessCancelled()  // returns when the job's task is cancelled
    return Task.isCancelled ? "stopped early: Task.isCancelled was true" : "finished"
  }
  while queue.isIdle { await Task.yield() }
  while gate.waiterCount == 0 { await Task.yield() }
  job.cancel()
  print("   the job decides: its awaiter \(describe(await job.result))")
}

print("3. cancelAll() with one job running and two pending")
do {
  let queue = ConcurrentQueue(name: "three", limit: 1)
  let gate = AsyncSemaphore(value: 0)
  let running = queue.enqueue { try await gate.waitUnlessCancelled() }
  let pending = [queue.enqueue { "a" }, queue.enqueue { "b" }]
  while queue.runningCount == 0 { await Task.yield() }
  queue.cancelAll()
  print("   running job's awaiter \(describe(await running.result))")
  for job in pending { print("   pending job's awaiter \(describe(await job.result))") }
  print("   the queue stays usable: \(describe(await queue.enqueue { "next job ran" }.result))")
}

print("4. The task waiting in enqueueAndWait is cancelled before its turn")
do {
  let gate = AsyncSemaphore(value: 0)
  let queue = try await busyQueue("four", gate: gate)
  let caller = Task { try await queue.enqueueAndWait { "ran" } }
  while queue.pendingCount == 0 { await Task.yield() }
  caller.cancel()
  print("   the caller \(describe(await caller.result)); the job never ran")
  gate.signal()
}

print("5. The task running an enqueueAndWait job is cancelled")
do {
  let queue = SerialQueue(name: "five")
  let gate = AsyncSemaphore(value: 0)
  let caller = Task {
    try await queue.enqueueAndWait {
      try await gate.waitUnlessCancelled()
      return "finished"
    }
  }
  while gate.waiterCount == 0 { await Task.yield() }
  caller.cancel()
  print("   the job sees it (here, its wait throws): the caller \(describe(await caller.result))")
}

print("6. A waitUntilIdle caller is cancelled")
do {
  let gate = AsyncSemaphore(value: 0)
  let queue = try await busyQueue("six", gate: gate)
  let waiter = Task { try await queue.waitUntilIdle() }
  waiter.cancel()
  print(
    "   the waiter \(describe(await waiter.result)); the jobs go on: pending \(queue.pendingCount), idle \(queue.isIdle)"
  )
  gate.signal()
}

print("7. A barrier cancelled while it waits")
do {
  let queue = ConcurrentQueue(name: "seven", limit: 2)
  let gate = AsyncSemaphore(value: 0)
  let reader = queue.enqueue { try await gate.waitUnlessCancelled() }
  let barrier = queue.enqueueBarrier { "barrier ran" }
  let behind = queue.enqueue { "the job behind it ran" }
  barrier.cancel()
  print("   the barrier's awaiter \(describe(await barrier.result))")
  print("   the job behind it did not wait for the reader: \(describe(await behind.result))")
  gate.signal()
  _ = await reader.result
}

print("8. A task waiting for an AsyncSemaphore permit is cancelled")
do {
  let semaphore = AsyncSemaphore(value: 0)
  let waiter = Task { try await semaphore.waitUnlessCancelled() }
  while semaphore.waiterCount == 0 { await Task.yield() }
  waiter.cancel()
  print(
    "   it \(describe(await waiter.result)) and took no permit: \(semaphore.waiterCount) waiting"
  )
  semaphore.signal()
  print("   a later signal is kept for the next waiter: \(semaphore.availablePermits) available")
}

print("9. An ActorQueue job cancelled before it starts")
do {
  actor Box { var value = 0 }
  let box = Box()
  let queue = ActorQueue<Box>(name: "nine")
  // Enqueued and cancelled from inside a job on the same actor: the two new jobs cannot begin
  // until this job gives the actor up, so the first is surely cancelled before it starts.
  let (job, second) = try await queue.enqueue(on: box) { _ in
    let job = queue.enqueue(on: box) { box in box.value += 1 }
    let second = queue.enqueue(on: box) { box in box.value }
    job.cancel()
    return (job, second)
  }.value
  print(
    "   its awaiter \(describe(await job.result)); "
      + "the next job started anyway: \(describe(await second.result))"
  )
}

print("10. cancelAll() on four uploads, drawn: one running, two in line, one after the call")
do {
  let queue = ConcurrentQueue(name: "ten", limit: 1)
  let gate = AsyncSemaphore(value: 0)
  let started = AsyncSemaphore(value: 0)
  // Written by the jobs and by this code, each line after what it follows has happened.
  let log = Mutex<[String]>([])
  let running = queue.enqueue {
    log.withLock { $0.append("start 1 upload") }
    started.signal()
    try await gate.waitUnlessCancelled()
  }
  await started.wait()
  let pending = [2, 3].map { number in
    log.withLock { $0.append("waiting \(number) upload") }
    return queue.enqueue { log.withLock { $0.append("start \(number) upload") } }
  }
  queue.cancelAll()
  for (index, job) in pending.enumerated() where (try? await job.result.get()) == nil {
    log.withLock { $0.append("cancelled \(index + 2) upload: taken out of line, never ran") }
  }
  if (try? await running.result.get()) == nil {
    log.withLock { $0.append("cancelled 1 upload: its wait threw CancellationError") }
  }
  let next = queue.enqueue {
    log.withLock { $0.append("start 4 upload") }
    log.withLock { $0.append("finish 4 upload: enqueued after cancelAll(), it runs") }
  }
  _ = await next.result
  for line in log.withLock({ $0 }) { print("  \(line)") }
  print("  (the jobs in line end at once; the running one ends when it acts on the cancellation)")
}
