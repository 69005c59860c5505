import OrderlyTestSupport
import Testing

@Suite("Gate")
struct GateTests {
  @Test("waiters resume when the gate opens; later waits return at once")
  func opens() async throws {
    let gate = Gate()
    let passed = OrderedRecorder<Int>()
    let waiters = (0..<3).map { index in
      Task {
        try await gate.wait()
        passed.record(index)
      }
    }
    #expect(!gate.isOpen)
    try await gate.waitForWaiters(3)
    #expect(passed.count == 0)
    gate.open()
    gate.open()
    for waiter in waiters { try await waiter.value }
    #expect(Set(passed.values) == [0, 1, 2])
    try await gate.wait()
    #expect(gate.isOpen)
  }

  @Test("a cancelled waiter leaves at once with CancellationError")
  func cancellation() async throws {
    let gate = Gate()
    let waiter = Task { try await gate.wait() }
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
    #expect(gate.waiterCount == 0)
  }
}

@Suite("OrderedRecorder")
struct OrderedRecorderTests {
  @Test("keeps one task's order and wakes a waiter at the count")
  func order() async throws {
    let recorder = OrderedRecorder<Int>()
    let waiter = Task { try await recorder.waitForCount(100) }
    for index in 0..<100 { recorder.record(index) }
    try await waiter.value
    #expect(recorder.values == Array(0..<100))
    #expect(recorder.count == 100)
  }

  @Test("loses nothing under concurrent writers")
  func concurrentWriters() async throws {
    let recorder = OrderedRecorder<Int>()
    await withTaskGroup(of: Void.self) { group in
      for writer in 0..<8 {
        group.addTask { for index in 0..<1_000 { recorder.record(writer * 1_000 + index) } }
      }
    }
    #expect(Set(recorder.values).count == 8_000)
  }
}

@Suite("ManualClock")
struct ManualClockTests {
  @Test("sleepers wake only when time reaches their deadline")
  func advance() async throws {
    let clock = ManualClock()
    let woke = OrderedRecorder<String>()
    let short = Task {
      try await clock.sleep(for: .seconds(1))
      woke.record("short")
    }
    let long = Task {
      try await clock.sleep(for: .seconds(5))
      woke.record("long")
    }
    try await clock.waitForSleepers(2)
    clock.advance(by: .seconds(2))
    try await short.value
    #expect(woke.values == ["short"])
    #expect(clock.sleeperCount == 1)
    clock.advance(to: ManualClock.Instant(offset: .seconds(5)))
    try await long.value
    #expect(woke.values == ["short", "long"])
    #expect(clock.now == ManualClock.Instant(offset: .seconds(5)))
  }

  @Test("time never goes back, and a past deadline returns at once")
  func monotonic() async throws {
    let clock = ManualClock()
    clock.advance(by: .seconds(3))
    clock.advance(by: .seconds(-10))
    clock.advance(to: ManualClock.Instant(offset: .seconds(1)))
    #expect(clock.now.offset == .seconds(3))
    try await clock.sleep(until: ManualClock.Instant(offset: .seconds(2)))
  }

  @Test("a cancelled sleeper wakes at once with CancellationError")
  func cancellation() async throws {
    let clock = ManualClock()
    let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
    try await clock.waitForSleepers(1)
    sleeper.cancel()
    await #expect(throws: CancellationError.self) { try await sleeper.value }
    #expect(clock.sleeperCount == 0)
  }
}
