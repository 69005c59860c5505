// Blocking writes on a thread of their own: a SerialQueue whose executor is a
// DedicatedThreadExecutor runs them in order, each blocking its thread for 20 ms, while Swift's
// cooperative pool keeps its threads for everything else.
import Foundation
import OrderlyCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The thread a piece of code runs on, as a number to compare.
func currentThread() -> UInt {
  UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(bitPattern: UInt(pthread_self()))))
}

/// A write that blocks its thread, as a synchronous file or database call does.
func blockingWrite(_ record: Int) {
  usleep(20_000)
}

let disk = DedicatedThreadExecutor(name: "disk", threads: 1)
let writes = SerialQueue(name: "writes", executor: disk)
let threads = Mutex<[UInt]>([])
let written = Mutex<[Int]>([])
let events = Mutex<[String]>([])

print("Four blocking writes, enqueued from synchronous code:")
for record in 1...4 {
  writes.enqueueDetached {
    events.withLock { $0.append("start \(record) write") }
    blockingWrite(record)
    threads.withLock { $0.append(currentThread()) }
    written.withLock { $0.append(record) }
    events.withLock { $0.append("finish \(record) write: it blocked its thread 20 ms") }
  }
}
try await writes.waitUntilIdle()
// Writes 2 to 4 were in line behind write 1 from the moment they were enqueued.
var lines = events.withLock { $0 }
lines.insert(contentsOf: (2...4).map { "waiting \($0) write" }, at: 1)
for line in lines { print("  \(line)") }

let writeThreads = Set(threads.withLock { $0 })
// A few tasks on the pool, to see which threads it uses.
var poolThreads: Set<UInt> = []
for _ in 0..<20 { poolThreads.insert(await Task.detached { currentThread() }.value) }
print("  in the order enqueued: \(written.withLock { $0 } == [1, 2, 3, 4] ? "yes" : "no")")
print("  all on one thread of their own: \(writeThreads.count == 1 ? "yes" : "no")")
print(
  "  that thread is one of the cooperative pool's: "
    + (writeThreads.isDisjoint(with: poolThreads) ? "no" : "yes")
)
disk.shutdown()
