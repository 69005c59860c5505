import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Testing

/// Fair shares across groups of keys (`DeliveryOptions.fairShares`), on every store.
///
/// Order is what is asserted, never time: which group each delivery went to while both groups
/// still had messages waiting, and the order inside each key.
@Suite("Fair shares, on every store", .timeLimit(.minutes(3)))
struct FairShareContractTests {
  /// Many keys with a few messages each (`big:`), and a few keys with many (`small:`).
  static let bigKeys = 50
  static let bigMessages = 6
  static let smallKeys = 2
  static let smallMessages = 150

  static func append(to outbox: any DurableOutbox<String>) async throws {
    for key in 0..<bigKeys {
      try await outbox.append(
        contentsOf: (0..<bigMessages).map { "big:\(key)#\($0)" },
        partition: "big:\(key)"
      )
    }
    for key in 0..<smallKeys {
      try await outbox.append(
        contentsOf: (0..<smallMessages).map { "small:\(key)#\($0)" },
        partition: "small:\(key)"
      )
    }
  }

  /// Whether each key's messages were delivered in order, each once.
  static func inOrder(_ delivered: [String]) -> Bool {
    var next: [Substring: Int] = [:]
    for message in delivered {
      let parts = message.split(separator: "#")
      guard parts.count == 2, let number = Int(parts[1]) else { return false }
      guard next[parts[0], default: 0] == number else { return false }
      next[parts[0]] = number + 1
    }
    return true
  }

  @Test(
    "while lines of both groups wait, their deliveries follow the weights, not their numbers of keys",
    arguments: Store.all
  )
  func followsWeights(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    try await Self.append(to: outbox)
    // 2 keys of weight 3 beside 50 keys of weight 1: three deliveries in four go to the two.
    let shares = try FairShares([
      FairShares.Group(prefix: "big:", weight: 1),
      FairShares.Group(prefix: "small:", weight: 3),
    ])
    let seen = OrderedRecorder<String>()
    try subject.startConfigured(
      { options in
        options.limit = 2
        options.fairShares = shares
      },
      .each { envelope in seen.record(envelope.message) }
    )
    try await outbox.waitUntilDelivered()
    let delivered = seen.values
    let total = Self.bigKeys * Self.bigMessages + Self.smallKeys * Self.smallMessages
    #expect(delivered.count == total)
    #expect(Self.inOrder(delivered))
    // The first 240 deliveries: at 3 : 1, 180 and 60, and both groups still have messages
    // waiting (300 each). A turn is up to 16 deliveries of one line, so the share is kept
    // within a turn or two.
    let early = delivered.prefix(240)
    let small = Double(early.count { $0.hasPrefix("small:") }) / Double(early.count)
    #expect(small >= 0.65 && small <= 0.85, "small's share of the first 240: \(small)")
    await subject.finish()
  }

  @Test(
    "a group with few keys is not starved by one with many, weights equal",
    arguments: Store.all
  )
  func fewKeysNotStarved(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    try await Self.append(to: outbox)
    let shares = try FairShares([FairShares.Group(prefix: "small:", weight: 1)], otherKeys: 1)
    let seen = OrderedRecorder<String>()
    try subject.startConfigured(
      { options in
        options.limit = 2
        options.fairShares = shares
      },
      .each { envelope in seen.record(envelope.message) }
    )
    try await outbox.waitUntilDelivered()
    let delivered = seen.values
    #expect(Self.inOrder(delivered))
    // The big keys are the other keys here. Equal weights: half of the first 300 each.
    let early = delivered.prefix(300)
    let small = Double(early.count { $0.hasPrefix("small:") }) / Double(early.count)
    #expect(small >= 0.4 && small <= 0.6, "small's share of the first 300: \(small)")
    await subject.finish()
  }

  @Test("groups that cannot be kept are refused, saying what is wrong")
  func refused() {
    let cases: [([FairShares.Group], Int, String)] = [
      ([FairShares.Group(prefix: "", weight: 1)], 1, "not empty"),
      (
        [FairShares.Group(prefix: "a:", weight: 1), FairShares.Group(prefix: "a:", weight: 2)], 1,
        "twice"
      ),
      ([FairShares.Group(prefix: "a:", weight: 0)], 1, "1 to 1000"),
      ([FairShares.Group(prefix: "a:", weight: 1_001)], 1, "1 to 1000"),
      ([], 0, "other keys"),
    ]
    for (groups, other, words) in cases {
      let result = Result { () throws(OutboxError) in try FairShares(groups, otherKeys: other) }
      guard case .failure(let error) = result else {
        Issue.record("accepted: \(groups) other \(other)")
        continue
      }
      let said = error.description
      #expect(said.contains(words), "\(said)")
    }
  }
}
