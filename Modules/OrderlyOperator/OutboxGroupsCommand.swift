// `orderly outbox groups`: the keys by fair-share group, as the deliverers' `FairShares` group
// them: how many keys and messages wait in each, how many are held, stuck, and the oldest.
import ArgumentParser
import Foundation
import OrderlyOutboxCore

struct OutboxGroups: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "groups",
    abstract: "The keys by fair-share group: keys, pending, held, stuck, the oldest message.",
    discussion: """
      Give the groups as the deliverers' fair shares name them (DeliveryOptions.fairShares): \
      PREFIX=WEIGHT (or PREFIX, weight 1) for each; the keys no prefix names are the group \
      "(other keys)", whose weight is --other-keys. A key belongs to its longest prefix. \
      SHARE is the part of the deliveries each group's weight gives it among the groups with \
      keys waiting, while delivery is saturated.
      """
  )

  @OptionGroup var target: OutboxTarget
  @OptionGroup var read: ReadOptions
  @OptionGroup var policy: PolicyOptions
  @Argument(help: ArgumentHelp("A group: its key prefix and weight.", valueName: "PREFIX=WEIGHT"))
  var groups: [String] = []
  @Option(name: .customLong("other-keys"), help: "The weight of the keys no prefix names.")
  var otherKeys = 1

  /// The groups, as `FairShares` takes them, refused as `start` would refuse them.
  func shares() throws -> FairShares {
    let parsed = try groups.map { text throws -> FairShares.Group in
      guard let equals = text.lastIndex(of: "=") else {
        return FairShares.Group(prefix: text, weight: 1)
      }
      guard let weight = Int(text[text.index(after: equals)...]) else {
        throw ValidationError(
          "'\(text)' is not PREFIX=WEIGHT: the weight after '=' is a whole number, 1 to 1000"
        )
      }
      return FairShares.Group(prefix: String(text[..<equals]), weight: weight)
    }
    do {
      return try FairShares(parsed, otherKeys: otherKeys)
    } catch {
      throw ValidationError(error.description)
    }
  }

  func validate() throws { _ = try shares() }

  func run() async throws {
    let shares = try shares()
    try await operate {
      let now = Date()
      let keys = try await target.with { outbox in try await outbox.keys() }
      let rows = OperatorReport.GroupRow.rows(
        keys,
        shares: shares,
        policy: policy.deadLetters.policy,
        now: now
      )
      print(read.format == .json ? OperatorReport.json(rows) : OperatorReport.text(rows, now: now))
    }
  }
}

extension OperatorReport {
  /// One fair-share group, as `groups` prints it.
  struct GroupRow: Encodable {
    /// The group's key prefix; `null` for the keys no prefix names.
    @NullWhenAbsent var prefix: String?
    let weight: Int
    /// The part of the deliveries the group's weight gives it among the groups with keys
    /// waiting, in percent; `null` when none of its keys waits.
    @NullWhenAbsent var sharePercent: Double?
    /// Keys with messages pending.
    let keys: Int
    let pending: Int
    /// Keys a worker holds now (PostgreSQL; always 0 for SQLite).
    let held: Int
    /// Keys that do not move (`keys --stuck`), for any reason.
    let stuck: Int
    @NullWhenAbsent var oldestPendingAppendedAt: Date?

    /// A row for each group, in the order the groups were given, then the other keys.
    static func rows(
      _ keys: [OutboxKey],
      shares: FairShares,
      policy: DeadLetterPolicy,
      now: Date
    ) -> [GroupRow] {
      let byGroup = Dictionary(grouping: keys.filter { $0.pending > 0 }) {
        shares.group(of: $0.partition)
      }
      // Shares among the groups that wait: a group with nothing pending leaves its part.
      let total = Double(
        shares.names.filter { byGroup[$0] != nil }.reduce(0) { $0 + shares.weight(of: $1) }
      )
      return shares.names.map { name in
        let members = byGroup[name] ?? []
        let weight = shares.weight(of: name)
        return GroupRow(
          prefix: name == FairShares.otherKeysName ? nil : name,
          weight: weight,
          sharePercent: members.isEmpty ? nil : (1000 * Double(weight) / total).rounded() / 10,
          keys: members.count,
          pending: members.reduce(0) { $0 + $1.pending },
          held: members.count { key in key.holder.map { $0.leaseExpiresAt > now } ?? false },
          stuck: members.count { !$0.stuck(onDeadLetter: policy, at: now).isEmpty },
          oldestPendingAppendedAt: members.compactMap(\.oldestPendingAppendedAt).min()
        )
      }
    }
  }

  static func text(_ rows: [GroupRow], now: Date) -> String {
    var table: [[String]] = [
      ["GROUP", "WEIGHT", "SHARE", "KEYS", "PENDING", "HELD", "STUCK", "OLDEST"]
    ]
    for row in rows {
      table.append([
        row.prefix ?? FairShares.otherKeysName, "\(row.weight)",
        row.sharePercent.map { "\($0) %" } ?? "-",
        "\(row.keys)", "\(row.pending)", "\(row.held)", "\(row.stuck)",
        row.oldestPendingAppendedAt.map { age(now.timeIntervalSince($0)) } ?? "-",
      ])
    }
    return self.table(table)
  }
}
