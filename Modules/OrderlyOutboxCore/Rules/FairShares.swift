// Fair shares across groups of keys (tenants), issue "What every job queue has", item 5: the
// groups a user sets (`FairShares`), the turn of each group (`FairShareTurns`, stride
// scheduling, no clock or store), and which waiting lines begin when slots free up
// (`FairAdmission`, a SQLite outbox's slots). A PostgreSQL worker asks `FairShareTurns` in what
// order to take the lines it found, group by group.

/// Groups of keys with weights: while delivery is saturated (more lines wait than it has
/// slots), the deliveries each group gets follow its weight, however many keys it has.
///
/// Set on the delivery options (``DeliveryOptions/fairShares``). A group is every key that
/// starts with its prefix (a key belongs to the group of its longest matching prefix); the keys
/// no prefix names form one more group, weighted by `otherKeys`. With groups `acme:` weight 3
/// and `tiny:` weight 1, and lines of both waiting, `acme:` gets three deliveries for each one
/// `tiny:` gets, whether `acme:` has 1,000 keys waiting and `tiny:` 10, or the other way round:
/// slots go to groups, then to the group's lines in the order they came to wait. Order inside a
/// key is unchanged: this decides only which line is delivered next. A group with nothing
/// waiting leaves its share to the others, and when it comes back it does not take a burst of
/// what it did not use. While slots are free, every line that waits is delivered at once, as
/// without groups.
///
/// ```swift
/// var options = FleetDeliveryOptions(limit: 16)
/// options.fairShares = try FairShares([
///   FairShares.Group(prefix: "acme:", weight: 3),
///   FairShares.Group(prefix: "tiny:", weight: 1),
/// ])
/// ```
///
/// Each process that delivers shares out its own slots by the weights, so a fleet's deliveries
/// follow them too.
public struct FairShares: Sendable, Equatable, CustomStringConvertible {
  /// A group: the keys that start with its prefix, and its weight.
  public struct Group: Sendable, Equatable {
    /// The keys' prefix; not empty.
    public let prefix: String
    /// Its weight: 1 to 1,000.
    public let weight: Int

    /// A group; ``FairShares/init(_:otherKeys:)`` refuses one that cannot be kept.
    ///
    /// - Parameters:
    ///   - prefix: The keys' prefix.
    ///   - weight: Its weight, 1 to 1,000.
    public init(prefix: String, weight: Int) {
      self.prefix = prefix
      self.weight = weight
    }
  }

  /// The groups, in the order given.
  public let groups: [Group]
  /// The groups, longest prefix first (a key belongs to the most specific).
  private let longestFirst: [Group]
  /// The weight of the keys no group's prefix names (the default line among them), together.
  public let otherKeys: Int

  /// The name ``group(of:)`` gives the keys no prefix names.
  public static let otherKeysName = "(other keys)"

  /// `acme: 3, tiny: 1, other keys 1`.
  public var description: String {
    (groups.map { "\($0.prefix) \($0.weight)" } + ["other keys \(otherKeys)"])
      .joined(separator: ", ")
  }

  /// Groups, refused when they cannot be kept.
  ///
  /// - Parameters:
  ///   - groups: Prefixes and weights; each prefix not empty, and given once.
  ///   - otherKeys: The weight of the keys no prefix names; 1 by default.
  /// - Throws: ``OutboxError/invalidOption(_:)`` naming the group and what is wrong.
  public init(_ groups: [Group], otherKeys: Int = 1) throws(OutboxError) {
    var seen: Set<String> = []
    for group in groups {
      guard !group.prefix.isEmpty else {
        throw .invalidOption(
          "a fair-share group's key prefix is not empty (the keys no prefix names are a group "
            + "already: set its weight with otherKeys)"
        )
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
    guard (1...1_000).contains(otherKeys) else {
      throw .invalidOption("the other keys' fair-share weight is 1 to 1000 (got \(otherKeys))")
    }
    self.groups = groups
    self.longestFirst = groups.sorted { $0.prefix.count > $1.prefix.count }
    self.otherKeys = otherKeys
  }

  /// The group a key belongs to: its longest matching prefix, or ``otherKeysName``.
  ///
  /// - Parameter partition: The key (`nil`: the default line, one of the other keys).
  /// - Returns: The group's prefix, or ``otherKeysName``.
  public func group(of partition: String?) -> String {
    guard let partition else { return Self.otherKeysName }
    return longestFirst.first { partition.hasPrefix($0.prefix) }?.prefix ?? Self.otherKeysName
  }

  /// A group's weight (``otherKeys`` for ``otherKeysName``).
  ///
  /// - Parameter group: A group's prefix, or ``otherKeysName``.
  /// - Returns: Its weight.
  public func weight(of group: String) -> Int {
    groups.first { $0.prefix == group }?.weight ?? otherKeys
  }

  /// Every group's name: the prefixes in the order given, then ``otherKeysName``.
  package var names: [String] { groups.map(\.prefix) + [Self.otherKeysName] }
}

/// The turn of each group: stride scheduling over the groups of ``FairShares``.
///
/// Each group has a pass, which grows by its stride (inversely proportional to its weight) for
/// each delivery it gets; the waiting group with the lowest pass goes next. While every group
/// waits, the deliveries they get follow their weights (3 : 1 gets 3 of 4); a group with 10 keys
/// gets its share beside one with 1,000, since turns go to groups, not keys. A group that waited
/// for nothing for a while starts from the pass of the last group chosen, so it does not take a
/// burst of the turns it did not use.
package struct FairShareTurns: Sendable, Equatable {
  /// The groups.
  package let shares: FairShares
  /// Each group's pass, by name.
  private var pass: [String: Int64] = [:]
  /// The virtual time, where a group that comes back starts.
  ///
  /// The lowest pass among the groups waiting when a turn was last given; it never goes back.
  private var current: Int64 = 0
  /// Groups that had nothing waiting at a turn given since their own last turn: they start at
  /// ``current`` when they come back.
  private var idle: Set<String> = []

  /// The stride of weight 1; every stride is this divided by a weight.
  static let unit: Int64 = 1_000_000_000
  /// What a turn is charged when it is given: a whole turn's deliveries.
  ///
  /// A turn's deliveries pay from it first (the rule of every store makes 16 a turn); what it
  /// did not use is given back when it ends. Charging only when a turn ends would let the group
  /// with the most turns running look cheapest, and take still more slots.
  package static let turnCharge = LineTurn.standardDeliveries

  /// Turns for `shares`, none given yet.
  package init(_ shares: FairShares) { self.shares = shares }

  /// Which of the waiting groups goes next, charged a turn (``turnCharge``).
  ///
  /// - Parameter waiting: The groups with a line waiting for a slot.
  /// - Returns: The group, or `nil` if none waits.
  package mutating func next(among waiting: Set<String>) -> String? {
    comeBack(waiting)
    guard
      let chosen = waiting.min(by: { a, b in
        let (passA, passB) = (pass[a] ?? current, pass[b] ?? current)
        return passA != passB ? passA < passB : a < b
      })
    else { return nil }
    chose(chosen, among: waiting)
    return chosen
  }

  /// Counts a turn given to `group`, charged a turn (``turnCharge``), when the choice was made elsewhere
  /// (a worker took the lines ``order(_:upTo:)`` ordered, skipping those another took first).
  ///
  /// - Parameters:
  ///   - group: The group given the turn.
  ///   - waiting: The groups that had lines waiting when it was given.
  package mutating func chose(_ group: String, among waiting: Set<String>) {
    let waiting = waiting.union([group])
    comeBack(waiting)
    idle.formUnion(shares.names.filter { !waiting.contains($0) })
    // The virtual time moves to the lowest pass among the groups waiting, not to the chosen
    // group's: a group chosen out of turn (its lines were the ones free) must not drag the
    // others up to its pass, which would undo their weights.
    let lowest = waiting.map { pass[$0] ?? current }.min() ?? current
    current = max(current, lowest)
    charge(group, deliveries: Self.turnCharge)
  }

  /// Lets a group that comes back start at the current pass.
  ///
  /// A group that waited for nothing takes no burst of the turns it did not use. A group that
  /// kept waiting keeps its pass, below the current one if a turn gave back what it did not use.
  private mutating func comeBack(_ waiting: Set<String>) {
    for group in waiting where idle.contains(group) || pass[group] == nil {
      if (pass[group] ?? .min) < current { pass[group] = current }
      idle.remove(group)
    }
  }

  /// Charges a group for deliveries (negative: gives back what a turn charged when it was given
  /// did not use).
  ///
  /// - Parameters:
  ///   - group: The group.
  ///   - deliveries: How many deliveries to add (or take back).
  package mutating func charge(_ group: String, deliveries: Int) {
    let stride = Self.unit / Int64(shares.weight(of: group))
    pass[group, default: current] += stride * Int64(deliveries)
  }

  /// Whether the turn of one of `others` comes before `group`'s.
  ///
  /// - Parameters:
  ///   - others: Groups with lines waiting.
  ///   - group: A group delivering.
  /// - Returns: `true` when one of them has a lower pass (a group that comes back starts at
  ///   the current pass).
  package func comesBefore(_ others: Set<String>, _ group: String) -> Bool {
    let mine = pass[group] ?? current
    return others.contains { other in
      let theirs =
        idle.contains(other) ? max(pass[other] ?? current, current) : pass[other] ?? current
      return theirs < mine
    }
  }

  /// Charges a group for `count` messages a turn of its hands to the handler.
  ///
  /// What the turn was charged when given (`prepaid`) pays first, the rest is charged now.
  /// Charged as deliveries happen, a turn that runs long (no other line waited) counts while it
  /// runs.
  ///
  /// - Parameters:
  ///   - group: The turn's group.
  ///   - count: The messages handed to the handler.
  ///   - prepaid: What the turn has left of its charge; lowered by what pays.
  package mutating func handing(_ group: String, _ count: Int, prepaid: inout Int) {
    let paid = min(prepaid, max(0, count))
    prepaid -= paid
    charge(group, deliveries: count - paid)
  }

  /// Gives back what an ended turn was charged and did not use.
  ///
  /// - Parameters:
  ///   - group: The turn's group.
  ///   - prepaid: What the turn had left of its charge.
  package mutating func ended(_ group: String, prepaid: Int) {
    if prepaid > 0 { charge(group, deliveries: -prepaid) }
  }

  /// Puts candidates of several groups in the order their groups' turns come, charging nothing:
  /// what a worker tries to take, in order, when it has free slots.
  ///
  /// - Parameters:
  ///   - candidates: Each group's lines, in the order they came to wait.
  ///   - count: How many to order at most.
  /// - Returns: Up to `count` lines, group by group as their turns come.
  package func order<Line>(_ candidates: [String: [Line]], upTo count: Int) -> [Line] {
    var trial = self
    var left = candidates.filter { !$0.value.isEmpty }
    var ordered: [Line] = []
    while ordered.count < count,
      let group = trial.next(among: Set(left.keys)), var lines = left[group]
    {
      ordered.append(lines.removeFirst())
      left[group] = lines.isEmpty ? nil : lines
    }
    return ordered
  }
}

/// Which waiting lines begin as slots free up, by their groups' turns: a deliverer with `limit`
/// slots, each line at most once at a time.
///
/// A line that comes to wait while it delivers waits until that turn ends (it would otherwise
/// hold a slot while waiting for itself). The caller begins each line returned, and reports each
/// turn's end with the deliveries it made.
package struct FairAdmission<Line: Hashable & Sendable>: Sendable {
  /// The groups' turns.
  package private(set) var turns: FairShareTurns
  /// How many lines deliver at once.
  package let limit: Int
  /// The lines that deliver, with their groups and what their turns have left of their charge.
  private var running: [Line: (group: String, prepaid: Int)] = [:]
  /// Lines waiting, by group, in the order they came.
  private var waiting: [String: [Line]] = [:]
  /// The lines in ``waiting``.
  private var queued: Set<Line> = []
  /// Lines that came to wait while they delivered: they wait once their turn ends.
  private var again: [Line: String] = [:]

  /// Slots for `shares`, all free.
  ///
  /// - Parameters:
  ///   - shares: The groups.
  ///   - limit: How many lines deliver at once; 1 or more.
  package init(_ shares: FairShares, limit: Int) {
    turns = FairShareTurns(shares)
    self.limit = max(1, limit)
  }

  /// How many lines wait for a slot.
  package var waitingCount: Int { waiting.values.reduce(0) { $0 + $1.count } + again.count }

  /// A line comes to wait.
  ///
  /// - Parameters:
  ///   - line: The line.
  ///   - group: Its group (``FairShares/group(of:)``).
  /// - Returns: The lines that begin now (this one, if a slot is free and no other waits).
  package mutating func arrive(_ line: Line, group: String) -> [Line] {
    if running[line] != nil {
      again[line] = group
      return []
    }
    if queued.insert(line).inserted { waiting[group, default: []].append(line) }
    return admit()
  }

  /// A line's turn is about to hand `count` messages to the handler: its group is charged.
  ///
  /// - Parameters:
  ///   - line: The line.
  ///   - count: The messages.
  package mutating func handing(_ line: Line, _ count: Int) {
    guard var turn = running[line] else { return }
    turns.handing(turn.group, count, prepaid: &turn.prepaid)
    running[line] = turn
  }

  /// A line's turn ended.
  ///
  /// - Parameter line: The line.
  /// - Returns: The lines that begin now.
  package mutating func finished(_ line: Line) -> [Line] {
    if let turn = running.removeValue(forKey: line) {
      // Charged a whole turn when chosen, then as it delivered: what it did not use is given
      // back.
      turns.ended(turn.group, prepaid: turn.prepaid)
    }
    if let group = again.removeValue(forKey: line), queued.insert(line).inserted {
      waiting[group, default: []].append(line)
    }
    return admit()
  }

  /// Forgets every line, waiting or not (the deliverer stopped); the turns are kept.
  package mutating func clear() {
    running = [:]
    waiting = [:]
    queued = []
    again = [:]
  }

  /// Fills free slots with waiting lines, group by group as their turns come.
  private mutating func admit() -> [Line] {
    var begun: [Line] = []
    while running.count < limit {
      let groups = Set(waiting.compactMap { $0.value.isEmpty ? nil : $0.key })
      guard let group = turns.next(among: groups), var lines = waiting[group] else { break }
      let line = lines.removeFirst()
      waiting[group] = lines.isEmpty ? nil : lines
      queued.remove(line)
      running[line] = (group, FairShareTurns.turnCharge)
      begun.append(line)
    }
    return begun
  }
}
