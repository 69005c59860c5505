import Dispatch
import OrderlyCore
import Testing

/// The lock and atomics every module uses.
///
/// On Linux they are `Mutex` and `Atomic`; built with
/// `-DORDERLY_PORTABLE_LOCKS` (as `.ci/run` does, under ThreadSanitizer) they are the heap-block
/// lock and atomic built-ins that Apple systems use, so both paths are checked here.
@Suite("OrderlyLock and OrderlyAtomic")
struct OrderlyLockTests {
  /// A counter guarded by the lock under test (announced to ThreadSanitizer, which cannot see
  /// `Mutex` on Linux, as the modules do).
  final class Counter: Sendable {
    let state = OrderlyLock((count: 0, inside: 0, overlaps: 0))
    func increment() {
      state.withLock(announcingTo: self) { state in
        state.inside += 1
        if state.inside > 1 { state.overlaps += 1 }
        state.count += 1
        state.inside -= 1
      }
    }
  }

  @Test("8 threads × 20,000 locked increments: every one counted, none overlapping")
  func lockExcludes() {
    let counter = Counter()
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for _ in 0..<20_000 { counter.increment() }
    }
    let (count, overlaps) = counter.state.withLock(announcingTo: counter) {
      ($0.count, $0.overlaps)
    }
    #expect(count == 160_000)
    #expect(overlaps == 0)
  }

  @Test("withLock returns what the body returns and rethrows what it throws")
  func lockReturnsAndThrows() {
    struct Refused: Error {}
    let lock = OrderlyLock([1, 2])
    #expect(lock.withLock { $0.count } == 2)
    #expect(throws: Refused.self) {
      try lock.withLock { (_: inout [Int]) throws(Refused) in throw Refused() }
    }
    lock.withLock(announcingTo: Counter()) { $0.append(3) }
    #expect(lock.withLock { $0 } == [1, 2, 3])
  }

  final class Totals: Sendable {
    let int = OrderlyAtomic<Int>(0)
    let wide = OrderlyAtomic<UInt64>(0)
    let small = OrderlyAtomic<UInt8>(0)
  }

  @Test("8 threads add and subtract at once: the totals are exact")
  func atomicArithmetic() {
    let totals = Totals()
    DispatchQueue.concurrentPerform(iterations: 8) { index in
      for _ in 0..<10_000 {
        totals.int.add(3, ordering: .relaxed)
        totals.int.subtract(1, ordering: .acquiringAndReleasing)
        totals.wide.add(UInt64(index + 1), ordering: .sequentiallyConsistent)
        totals.small.add(1, ordering: .relaxed)
      }
    }
    #expect(totals.int.load(ordering: .acquiring) == 8 * 10_000 * 2)
    #expect(totals.wide.load(ordering: .relaxed) == 10_000 * 36)
    // 80,000 additions of 1 wrap a UInt8: 80,000 mod 256.
    #expect(totals.small.load(ordering: .relaxed) == UInt8(80_000 % 256))
  }

  @Test("add and subtract report the values before and after, wrapping; exchange the old value")
  func atomicResults() {
    let small = OrderlyAtomic<UInt8>(255)
    let added = small.add(2, ordering: .relaxed)
    #expect(added.oldValue == 255 && added.newValue == 1)
    let subtracted = small.subtract(3, ordering: .relaxed)
    #expect(subtracted.oldValue == 1 && subtracted.newValue == 254)
    let flag = OrderlyAtomic<Bool>(false)
    #expect(flag.exchange(true, ordering: .acquiringAndReleasing) == false)
    #expect(flag.exchange(true, ordering: .relaxed) == true)
    flag.store(false, ordering: .releasing)
    #expect(flag.load(ordering: .acquiring) == false)
    let wide = OrderlyAtomic<UInt64>(.max)
    #expect(wide.add(1, ordering: .relaxed).newValue == 0)
  }

  @Test("exchange hands a flag to exactly one of many threads")
  func exchangeOnce() {
    let box = FlagBox()
    DispatchQueue.concurrentPerform(iterations: 16) { _ in
      if !box.flag.exchange(true, ordering: .acquiringAndReleasing) {
        box.winners.add(1, ordering: .relaxed)
      }
    }
    #expect(box.winners.load(ordering: .relaxed) == 1)
  }

  final class FlagBox: Sendable {
    let flag = OrderlyAtomic<Bool>(false)
    let winners = OrderlyAtomic<Int>(0)
  }
}
