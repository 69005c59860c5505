// A price cache read by many jobs at once and refreshed by a barrier: the refresh waits for the
// reads already running, runs alone, and only then do the reads behind it start. Readers never
// see a half-written cache, and no reader waits for another reader.
// course: the queue
import OrderlyCore
import OrderlyCourse
import Synchronization

/// The cache, and a record of who was inside at the same time.
///
/// Each read and refresh takes its time on a story clock, so who is inside when is the same on
/// every run, however busy the machine.
final class PriceCache: Sendable {
  private let state = Mutex(
    (prices: ["apple": 1.00, "pear": 1.20], version: 1, inside: 0, peak: 0, overlaps: 0)
  )
  private let clock: StoryClock

  init(clock: StoryClock) { self.clock = clock }

  func read(_ item: String, taking time: Int) async throws -> (price: Double, version: Int) {
    state.withLock { state in
      state.inside += 1
      state.peak = max(state.peak, state.inside)
    }
    try await clock.work(for: .milliseconds(time))
    return state.withLock { state in
      state.inside -= 1
      return (state.prices[item] ?? 0, state.version)
    }
  }

  /// Rewrites every price; counts any read found inside while it runs.
  func refresh() async throws {
    state.withLock { state in state.overlaps += state.inside }
    try await clock.work(for: .milliseconds(25))
    state.withLock { state in
      state.overlaps += state.inside
      state.prices = state.prices.mapValues { $0 * 2 }
      state.version += 1
    }
  }

  /// The most reads inside at once, and how many reads a refresh ever found inside.
  var record: (peak: Int, overlaps: Int) { state.withLock { ($0.peak, $0.overlaps) } }
}

let cacheClock = StoryClock()
let cache = PriceCache(clock: cacheClock)
let queue = ConcurrentQueue(name: "cache", limit: 3)

// Reads take 30, 50 and 40 ms before the refresh and 35, 20 and 45 ms after it.
let before = [30, 50, 40].map { time in
  queue.enqueue { try await cache.read("pear", taking: time) }
}
let refresh = queue.enqueueBarrier(name: "refresh") { try await cache.refresh() }
let after = [35, 20, 45].map { time in
  queue.enqueue { try await cache.read("pear", taking: time) }
}
try await cacheClock.advance(untilIdle: queue)

print("3 reads, a refresh barrier, 3 more reads, on ConcurrentQueue(limit: 3):")
for (index, read) in before.enumerated() {
  let result = try await read.value
  print("  read \(index + 1): version \(result.version), pear \(result.price)")
}
try await refresh.value
print("  refresh done")
for (index, read) in after.enumerated() {
  let result = try await read.value
  print("  read \(index + 4): version \(result.version), pear \(result.price)")
}
let record = cache.record
print("Reads inside at once, at most: \(record.peak)")
print(
  "Reads the refresh found inside: \(record.overlaps) "
    + (record.overlaps == 0 ? "(it ran alone)" : "(it ran beside them)")
)
// course end: the queue

// The same queue on the clock: each job takes a set time on a story clock, which moves to the
// next end once every job in flight waits on it, so every run prints the same times.
print("")
print("On the clock: reads 1-3, the refresh (4), reads 5-7, on ConcurrentQueue(limit: 3):")
let story = StoryClock()
let clocked = ConcurrentQueue(name: "clocked", limit: 3)
let enqueuedAt = story.now
func read(_ number: Int, taking milliseconds: Int) {
  clocked.enqueue {
    // A job that starts later than it was enqueued waited in line: drawn as a dotted box.
    if story.now > enqueuedAt { story.record(.waiting, number, "read", at: enqueuedAt) }
    story.record(.start, number, "read")
    let end = try await story.work(for: .milliseconds(milliseconds))
    story.record(.finish, number, "read: \(milliseconds) ms", at: end)
  }
}
read(1, taking: 30)
read(2, taking: 50)
read(3, taking: 40)
clocked.enqueueBarrier(name: "refresh") {
  if story.now > enqueuedAt { story.record(.waiting, 4, "refresh", at: enqueuedAt) }
  story.record(.start, 4, "refresh")
  let end = try await story.work(for: .milliseconds(25))
  story.record(.finish, 4, "refresh: 25 ms, alone", at: end)
}
read(5, taking: 35)
read(6, taking: 20)
read(7, taking: 45)
// How many jobs are in flight before each end: the three reads, then the refresh alone, then
// the three reads behind it.
for inFlight in [3, 2, 1, 1, 3, 2, 1] { try await story.advance(whenSleeping: inFlight) }
try await clocked.waitUntilIdle()
for line in story.lines { print("  \(line)") }
print("  (the refresh starts when the last read before it ends, and the reads after it wait)")
