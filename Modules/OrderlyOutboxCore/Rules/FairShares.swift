// Fair shares across groups of keys (tenants): which group's line gets a free delivery slot, by
// weight, however many keys each group has (issue "What every job queue has", item 5,
// groundwork). A value with no clock or store: a deliverer will keep one, and ask it each time a
// slot frees while lines of several groups wait.

/// Groups of keys with weights, and the turn of each: stride scheduling over groups.
///
/// Each group has a pass, which grows by its stride (inversely proportional to its weight) each
/// time it gets a slot; the waiting group with the lowest pass goes next. While every group
/// waits, the slots they get follow their weights exactly (3 : 1 gets 3 slots of 4); a group
/// with 10 keys gets its share beside one with 1,000, since slots go to groups, not keys. A
/// group that waited for nothing for a while starts from the others' pass, so it does not take
/// a burst of the slots it did not use. Order inside a key is the line's own: this decides only
/// which line is taken next.
package struct FairShares: Sendable, Equatable {
  /// A group: the keys that start with its prefix, and its weight.
  package struct Group: Sendable, Equatable {
    /// The keys' prefix.
    package let prefix: String
    /// Its weight: 1 to 1,000.
    package let weight: Int
  }

  /// The groups, longest prefix first (a key belongs to the most specific).
  package let groups: [Group]
  /// The weight of the keys no group names (their own group, named by ``otherKeys``).
  package let otherWeight: Int
  /// Each group's pass, by name.
  private var pass: [String: Int64] = [:]
  /// The pass of the last group that got a slot: where a group that comes back starts.
  private var current: Int64 = 0

  /// The name of the group of keys no prefix names.
  package static let otherKeys = ""
  /// The stride of weight 1; every stride is this divided by a weight.
  static let unit: Int64 = 1_000_000_000

  /// Groups, refused when they cannot be kept.
  ///
  /// - Parameters:
  ///   - groups: Prefixes and weights; prefixes not empty, each once.
  ///   - otherWeight: The weight of the keys no prefix names; 1 by default.
  /// - Throws: ``OutboxError/invalidOption(_:)`` naming the group and what is wrong.
  package init(_ groups: [(prefix: String, weight: Int)], otherWeight: Int = 1)
    throws(OutboxError)
  {
    var seen: Set<String> = []
    for group in groups {
      guard !group.prefix.isEmpty else {
        throw .invalidOption("a fair-share group's key prefix is not empty")
      }
      guard seen.insert(group.prefix).inserted else {
        throw .invalidOption("the fair-share group '\(group.prefix)' is named twice")
      }
      guard (1...1_000).contains(group.weight) else {
        throw .invalidOption(
          "the fair-share group '\(group.prefix)' has weight \(group.weight); a weight is 1 to 1000"
        )
      }
    }
    guard (1...1_000).contains(otherWeight) else {
      throw .invalidOption("the other keys' weight is 1 to 1000 (got \(otherWeight))")
    }
    self.groups = groups.map { Group(prefix: $0.prefix, weight: $0.weight) }
      .sorted { $0.prefix.count > $1.prefix.count }
    self.otherWeight = otherWeight
  }

  /// The group a key belongs to: its longest prefix, or ``otherKeys``.
  package func group(of partition: String?) -> String {
    guard let partition else { return Self.otherKeys }
    return groups.first { partition.hasPrefix($0.prefix) }?.prefix ?? Self.otherKeys
  }

  /// A group's weight.
  func weight(of group: String) -> Int {
    groups.first { $0.prefix == group }?.weight ?? otherWeight
  }

  /// Which of the waiting groups gets the next free slot, counted as given.
  ///
  /// - Parameter waiting: The groups with a line waiting for a slot.
  /// - Returns: The group, or `nil` if none waits.
  package mutating func next(among waiting: Set<String>) -> String? {
    // A group that comes back after waiting for nothing starts at the current pass, not
    // behind it.
    for group in waiting where (pass[group] ?? .min) < current { pass[group] = current }
    guard
      let chosen = waiting.min(by: { a, b in
        let (passA, passB) = (pass[a] ?? current, pass[b] ?? current)
        return passA != passB ? passA < passB : a < b
      })
    else { return nil }
    let now = pass[chosen] ?? current
    current = now
    pass[chosen] = now + Self.unit / Int64(weight(of: chosen))
    return chosen
  }
}
