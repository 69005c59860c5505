import OrderlyCore

let queue = SerialQueue(name: "notes")
queue.enqueue { print("1. saved the first note") }  // from synchronous code, like Task {}
queue.enqueue { print("2. saved the second, after the first ended") }
let count: Int = try await queue.enqueueAndWait { 2 }  // a typed result, in your own task
print("3. counted \(count) notes")
let slow = queue.enqueue { try await Task.sleep(for: .seconds(60)) }
slow.cancel()  // a job cancelled before it runs leaves the line at once
if case .failure(let error) = await slow.result, error is CancellationError {
  print("4. the cancelled job never ran")
}
