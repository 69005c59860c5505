import Foundation
import OrderlyOutboxCore
import Synchronization
import Testing

/// The HTTP fence convention: the headers a relay sends, and the receiver's gate.
@Suite("The fence convention: headers and the receiver's gate")
struct FenceGateTests {
  private func envelope(_ key: String?, fence: Int64?, id: UUID = UUID()) -> Envelope<String> {
    Envelope(
      id: id,
      sequence: 1,
      partition: key,
      message: "m",
      attempt: 1,
      appendedAt: Date(),
      fence: fence
    )
  }

  @Test("an envelope's headers carry its key, fence and id; without a fence, no fence header")
  func headers() {
    let id = UUID()
    let fenced = envelope("k", fence: 7, id: id).fenceHeaders
    #expect(
      fenced == ["Orderly-Key": "k", "Orderly-Fence": "7", "Idempotency-Key": id.uuidString]
    )
    let unfenced = envelope(nil, fence: nil, id: id).fenceHeaders
    #expect(unfenced == ["Orderly-Key": "", "Idempotency-Key": id.uuidString])
  }

  @Test("a lower fence than one accepted for the key is refused; the effect never runs")
  func staleRefused() async throws {
    let gate = FenceGate()
    let effects = Mutex<[String]>([])
    let newer = envelope("k", fence: 5)
    let older = envelope("k", fence: 4)
    let first = try await gate.apply(headers: newer.fenceHeaders) {
      effects.withLock { $0.append("5") }
    }
    let second = try await gate.apply(headers: older.fenceHeaders) {
      effects.withLock { $0.append("4") }
    }
    #expect(first == .applied)
    #expect(second == .stale(fence: 4, lastFence: 5))
    #expect(second.statusCode == 409)
    let ran = effects.withLock { $0 }
    #expect(ran == ["5"])
    #expect(gate.lastFence(of: "k") == 5)
    // Another key has its own fences.
    let other = try await gate.apply(headers: envelope("j", fence: 1).fenceHeaders) {}
    #expect(other == .applied)
  }

  @Test("a repeat of an applied message is answered as a success without running the effect")
  func repeatNotApplied() async throws {
    let gate = FenceGate()
    let count = Mutex(0)
    let delivery = envelope("k", fence: 2)
    let first = try await gate.apply(headers: delivery.fenceHeaders) { count.withLock { $0 += 1 } }
    // The next holder delivers it again, under a higher fence.
    let again = envelope("k", fence: 3, id: delivery.id)
    let second = try await gate.apply(headers: again.fenceHeaders) { count.withLock { $0 += 1 } }
    #expect(first == .applied)
    #expect(second == .repeated)
    #expect(second.statusCode == 200)
    let applied = count.withLock { $0 }
    #expect(applied == 1)
  }

  @Test("an effect that throws is not remembered: the next delivery applies it")
  func failedEffectForgotten() async throws {
    struct Failed: Error {}
    let gate = FenceGate()
    let delivery = envelope("k", fence: 1)
    await #expect(throws: Failed.self) {
      _ = try await gate.apply(headers: delivery.fenceHeaders) { throw Failed() }
    }
    let retried = try await gate.apply(headers: delivery.fenceHeaders) {}
    #expect(retried == .applied)
  }

  @Test("while a key's delivery is applied, another of the same key is refused for now")
  func busyKey() async throws {
    let gate = FenceGate()
    let (entered, enteredSignal) = AsyncStream.makeStream(of: Void.self)
    let (release, releaseSignal) = AsyncStream.makeStream(of: Void.self)
    let first = envelope("k", fence: 1)
    let running = Task {
      try await gate.apply(headers: first.fenceHeaders) {
        enteredSignal.yield()
        for await _ in release { break }
      }
    }
    for await _ in entered { break }
    let during = try await gate.apply(headers: envelope("k", fence: 2).fenceHeaders) {}
    releaseSignal.yield()
    let ended = try await running.value
    #expect(during == .busy)
    #expect(ended == .applied)
    let after = try await gate.apply(headers: envelope("k", fence: 2).fenceHeaders) {}
    #expect(after == .applied)
  }

  @Test(
    "headers missing or unreadable are refused as malformed (400), saying which",
    arguments: [
      (["Orderly-Key": "k", "Orderly-Fence": "1"], "no Idempotency-Key header"),
      (["Orderly-Key": "k", "Idempotency-Key": "abc"], "'abc' is not a message id"),
      (
        ["Orderly-Key": "k", "Orderly-Fence": "x1", "Idempotency-Key": UUID().uuidString],
        "'x1' is not a whole number"
      ),
      (["Orderly-Fence": "1", "Idempotency-Key": UUID().uuidString], "no Orderly-Key header"),
    ]
  )
  func malformed(headers: [String: String], expected: String) async throws {
    let gate = FenceGate()
    let ran = Mutex(false)
    let admission = try await gate.apply(headers: headers) { ran.withLock { $0 = true } }
    #expect(admission.statusCode == 400)
    #expect(admission.description.contains(expected), "\(admission)")
    let effectRan = ran.withLock { $0 }
    #expect(effectRan == false)
  }

  @Test("header names match without regard to case; identifiers are forgotten oldest first")
  func caseAndCapacity() async throws {
    let gate = FenceGate(remembering: 2)
    let ids = [UUID(), UUID(), UUID()]
    for id in ids {
      let admission = try await gate.apply(
        headers: ["orderly-key": "k", "ORDERLY-FENCE": "1", "idempotency-key": id.uuidString]
      ) {}
      #expect(admission == .applied)
    }
    // The first was forgotten (two are remembered): applied again; the last is a repeat.
    let oldest = try await gate.apply(key: "k", fence: 1, id: ids[0]) {}
    let newest = try await gate.apply(key: "k", fence: 1, id: ids[2]) {}
    #expect(oldest == .applied)
    #expect(newest == .repeated)
    // Unfenced deliveries (an outbox on SQLite) are checked by their id alone.
    let unfenced = try await gate.apply(key: "k", fence: nil, id: ids[2]) {}
    #expect(unfenced == .repeated)
  }
}
