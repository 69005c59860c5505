import ArgumentParser
import Foundation
import OrderlyOutboxCore

/// `orderly outbox schedules`: the recurring schedules with their next tick; pause, resume and
/// remove one.
struct OutboxSchedulesCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "schedules",
    abstract:
      "The recurring schedules, each with its key, last and next tick; pause, resume, remove.",
    subcommands: [List.self, Pause.self, Resume.self, Remove.self],
    defaultSubcommand: List.self
  )

  /// One schedule, as `list` prints it.
  struct Row: Encodable {
    let name: String
    /// `cron 0 9 * * MON-FRI (Europe/Paris)` or `every 1 hour`; `null` when this version
    /// cannot read the stored rule (see `problem`).
    @NullWhenAbsent var timing: String?
    /// The key its messages join; `null` for the default line.
    @NullWhenAbsent var key: String?
    /// `skip` or `catch-up-once`.
    let missedTicks: String
    let paused: Bool
    @NullWhenAbsent var lastTick: Date?
    /// `null` while paused.
    @NullWhenAbsent var nextTick: Date?
    /// Why it cannot tick; `null` when it can.
    @NullWhenAbsent var problem: String?

    init(_ info: OutboxScheduleInfo) {
      name = info.name
      timing = info.timing?.description
      key = info.partition
      missedTicks = info.missedTicks.rawValue
      paused = info.isPaused
      lastTick = info.lastTick
      nextTick = info.nextTick
      problem = info.problem
    }
  }

  static func text(_ rows: [Row], now: Date) -> String {
    guard !rows.isEmpty else { return "No schedules." }
    var table: [[String]] = [["NAME", "TIMING", "KEY", "LAST TICK", "NEXT TICK", "MISSED"]]
    for row in rows {
      let next: String
      if let problem = row.problem {
        next = "cannot tick: \(problem)"
      } else if row.paused {
        next = "paused"
      } else if let tick = row.nextTick {
        next =
          "\(OperatorReport.stamp(tick)) (in \(OperatorReport.age(tick.timeIntervalSince(now))))"
      } else {
        next = "none"
      }
      table.append([
        row.name, row.timing ?? "?", OperatorReport.shown(row.key),
        row.lastTick.map(OperatorReport.stamp) ?? "-", next, row.missedTicks,
      ])
    }
    return OperatorReport.table(table)
  }

  struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "list",
      abstract: "Every schedule, by name, with its last and next tick (the default)."
    )

    @OptionGroup var target: OutboxTarget
    @OptionGroup var read: ReadOptions

    func run() async throws {
      try await operate {
        let schedules = try await target.with { outbox in try await outbox.schedules.list() }
        let rows = schedules.map(Row.init)
        print(read.format == .json ? OperatorReport.json(rows) : text(rows, now: Date()))
      }
    }
  }

  struct Pause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "pause",
      abstract: "Stop a schedule's ticks, on every worker, until `schedules resume`."
    )

    @OptionGroup var target: OutboxTarget
    @Argument(help: ArgumentHelp("The schedule's name.", valueName: "NAME"))
    var name: String

    func run() async throws {
      try await operate {
        try await target.with { outbox in
          let known = try await outbox.schedules.list().first { $0.name == name }
          if known?.isPaused == true {
            throw OperatorFailure(message: "schedule '\(name)' is already paused; nothing changed")
          }
          try await outbox.schedules.pause(named: name)
        }
        print("paused schedule '\(name)': no worker appends its ticks until `schedules resume`")
      }
    }
  }

  struct Resume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "resume",
      abstract:
        "Let a paused schedule tick again, from its next tick (the ticks it missed stay missed)."
    )

    @OptionGroup var target: OutboxTarget
    @Argument(help: ArgumentHelp("The schedule's name.", valueName: "NAME"))
    var name: String

    func run() async throws {
      try await operate {
        let next = try await target.with { outbox -> Date? in
          let known = try await outbox.schedules.list().first { $0.name == name }
          if known?.isPaused == false {
            throw OperatorFailure(message: "schedule '\(name)' is not paused; nothing changed")
          }
          try await outbox.schedules.resume(named: name)
          return try await outbox.schedules.list().first { $0.name == name }?.nextTick
        }
        print(
          "resumed schedule '\(name)'"
            + (next.map { ": its next tick is \(OperatorReport.stamp($0))" } ?? "")
        )
      }
    }
  }

  struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "remove",
      abstract: "Delete a schedule; the messages it appended stay."
    )

    @OptionGroup var target: OutboxTarget
    @Argument(help: ArgumentHelp("The schedule's name.", valueName: "NAME"))
    var name: String

    func run() async throws {
      try await operate {
        try await target.with { outbox in try await outbox.schedules.remove(named: name) }
        print("removed schedule '\(name)'; the messages it appended stay")
      }
    }
  }
}
