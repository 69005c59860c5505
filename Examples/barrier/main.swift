// A price cache read by many jobs at once and refreshed by a barrier: the refresh waits for the
// reads already running, runs alone, and only then do the reads behind it start. Readers never
// see a half-written cache, and no reader waits for another reader.
import OrderlyCore
import Synchronization

/// The cache, and a record of who was inside at the same time.
final class PriceCache: Sendable {
  private let state = Mutex(
    (prices: ["apple": 1.00, "pear": 1.20], version: 1, inside: 0, peak: 0, overlaps: 0)
  )

  func read(_ item: String) async throws -> (price: Double, version: Int) {
    state.withLock { state in
      state.inside += 1
      state.peak = max(state.peak, state.inside)
    }
    try await Task.sleep(for: .milliseconds(20))
    return state.withLock { state in
      state.inside -= 1
      return (state.prices[item] ?? 0, state.version)
    }
  }

  /// Rewrites every price; counts any read found inside while it runs.
  func refresh() async throws {
    state.withLock { state in state.overlaps += state.inside }
    try await Task.sleep(for: .milliseconds(20))
    state.withLock { state in
      state.overlaps += state.inside
      state.prices = state.prices.mapValues { $0 * 2 }
      state.version += 1
    }
  }

  /// The most reads inside at once, and how many reads a refresh ever found inside.
  var record: (peak: Int, overlaps: Int) { state.withLock { ($0.peak, $0.overlaps) } }
}

let cache = PriceCache()
let queue = ConcurrentQueue(name: "cache", limit: 3)

let before = ["pear", "pear", "pear"].map { item in queue.enqueue { try await cache.read(item) } }
let refresh = queue.enqueueBarrier(name: "refresh") { try await cache.refresh() }
let after = ["pear", "pear", "pear"].map { item in queue.enqueue { try await cache.read(item) } }

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
