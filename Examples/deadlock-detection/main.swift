// A job that waits for another job on its own queue can never finish: the inner job cannot
// start until the outer one ends. The source's queue hangs here; SerialQueue throws at once.
import OrderlyCore

let queue = SerialQueue(name: "notes")

print("A job waits for a second job on the same queue:")
do {
  let count = try await queue.enqueueAndWait {
    try await queue.enqueueAndWait { 3 }  // would deadlock
  }
  print("  unexpected: got \(count)")
} catch let error as QueueError {
  print("  caught QueueError.reentrantWait")
  print("  \(error)")
}

print("The queue is still usable afterwards: \(try await queue.enqueueAndWait { "yes" })")

print("The fix: enqueue the inner work without waiting; it runs after the current job.")
let inner = try await queue.enqueueAndWait {
  let inner = queue.enqueue { "inner job ran second" }
  print("  outer job ran first")
  return inner
}
print("  \(try await inner.value)")
