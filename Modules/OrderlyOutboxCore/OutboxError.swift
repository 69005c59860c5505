// Why an outbox refused a call, and what to do.

public import Foundation

/// Why the outbox refused a call.
///
/// Each case says what was wrong and what to do. A refused append stored nothing; a refused
/// file was left as it was, side files included.
public enum OutboxError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The file could not be opened or created: a folder on its path does not exist or is not
  /// writable, it is a folder or not a regular file, its name is too long, or access is denied.
  case cannotOpen(path: String, reason: String)
  /// The file exists but is not an outbox: not SQLite, another program's database, or one
  /// written by a newer Orderly.
  case notAnOutbox(path: String, reason: String)
  /// Another connection held the database's lock for longer than the busy timeout.
  case busy(path: String, waited: Duration)
  /// The outbox was closed with ``DurableOutbox/close()``.
  case closed(path: String)
  /// The message could not be encoded as JSON; nothing was stored.
  case cannotEncode(reason: String)
  /// `Outbox.start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)`
  /// was called on an outbox that is already delivering. Call ``DurableOutbox/stop()`` first: a stopped
  /// outbox can be started again.
  case alreadyStarted
  /// Another outbox delivers this file (in another process, or another `Outbox` in this one),
  /// and `start` was asked not to wait for it (`WhenDeliveredElsewhere.fail`).
  case deliveredElsewhere(path: String)
  /// The disk (or the database's size limit) is full: nothing was stored. Free some space and
  /// try again; what was stored before is intact.
  case diskFull(path: String)
  /// The file is damaged (SQLite found it malformed) or was replaced by something that is not a
  /// database while the outbox had it open. Restore it from a backup, or move it away.
  case damaged(path: String, reason: String)
  /// Reading or writing the file failed (an I/O error of the disk or the file system).
  case storageFailed(path: String, reason: String)
  /// The calling task was cancelled before the call was done; nothing was stored.
  case cancelled
  /// A delivery option was out of range.
  case invalidOption(String)
  /// A line stopped at a dead letter with messages still behind it, so waiting for every
  /// message to be delivered would never end: retry or drop the dead letter.
  case lineStopped(partition: String?, deadLetter: UUID)
  /// No dead letter has that identifier.
  case noSuchDeadLetter(UUID)
  /// An append's unique key or window was refused (empty, too long, a window not above zero,
  /// or not one key per message); nothing was stored.
  case invalidUniqueKey(String)
  /// A recurring schedule was refused (a bad name, a cron expression with what is wrong in it,
  /// an interval out of range); nothing was changed.
  case invalidSchedule(String)
  /// No recurring schedule has that name (``OutboxSchedules``); nothing was changed.
  case noSuchSchedule(String)

  /// What went wrong and what to do about it, on one line.
  public var description: String {
    switch self {
    case .cannotOpen(let path, let reason) where Self.isServer(path):
      "cannot open the outbox at \(Self.escaped(path)): \(Self.escaped(reason))."
    case .cannotOpen(let path, let reason):
      "cannot open the outbox at \(Self.escaped(path)): \(Self.escaped(reason)). Check that its "
        + "folder exists and is writable, or choose another path."
    case .notAnOutbox(let path, let reason) where Self.isServer(path):
      "\(Self.escaped(path)) is not an Orderly outbox: \(Self.escaped(reason)). Its tables were "
        + "left untouched."
    case .notAnOutbox(let path, let reason):
      "\(Self.escaped(path)) is not an Orderly outbox: \(Self.escaped(reason)). The file was left "
        + "untouched; choose another path."
    case .busy(let path, let waited):
      "the outbox at \(Self.escaped(path)) is locked by another program or connection, which "
        + "held it for more than \(waited); try again once it is done."
    case .closed(let path):
      "the outbox at \(Self.escaped(path)) was closed; open it again."
    case .cannotEncode(let reason):
      "the message cannot be encoded as JSON (\(reason)); nothing was stored."
    case .alreadyStarted:
      "the outbox is already delivering (start(deliver:) was called before); call stop() "
        + "before starting it again."
    case .deliveredElsewhere(let path):
      "another outbox (in this process or another) is delivering \(Self.escaped(path)); stop "
        + "it, or start with whenDeliveredElsewhere: .wait to take over when it stops."
    case .diskFull(let path) where Self.isServer(path):
      "the database server of the outbox at \(Self.escaped(path)) is out of disk space or "
        + "memory; nothing was stored. Free some, then try again."
    case .diskFull(let path):
      "the disk holding the outbox at \(Self.escaped(path)) is full; nothing was stored. Free "
        + "some space and try again."
    case .damaged(let path, let reason):
      "the outbox at \(Self.escaped(path)) is damaged: \(Self.escaped(reason)). Restore it "
        + "from a backup, or move it away and start a new one."
    case .storageFailed(let path, let reason) where Self.isServer(path):
      "reading or writing the outbox at \(Self.escaped(path)) failed: \(Self.escaped(reason)). "
        + "Check the server's log, then try again."
    case .storageFailed(let path, let reason):
      "reading or writing the outbox at \(Self.escaped(path)) failed: \(Self.escaped(reason)). "
        + "Check the disk, then try again."
    case .cancelled:
      "the call was cancelled before it was done; nothing was stored."
    case .invalidOption(let problem):
      "invalid delivery option: \(problem)."
    case .lineStopped(let partition, let deadLetter):
      "the line \(partition.map { "'\($0)'" } ?? "(default)") stopped at dead letter "
        + "\(deadLetter) with messages behind it; retry it (retryDeadLetter(id:)) or drop it "
        + "(dropDeadLetter(id:)) to let them through."
    case .noSuchDeadLetter(let id):
      "no dead letter has the identifier \(id); list them with deadLetters()."
    case .invalidUniqueKey(let problem):
      "invalid unique key: \(Self.escaped(problem)); nothing was stored."
    case .invalidSchedule(let problem):
      "invalid schedule: \(Self.escaped(problem)); nothing was changed."
    case .noSuchSchedule(let name):
      "no schedule is named '\(Self.escaped(name))'; list them with schedules.list() "
        + "(orderly outbox schedules)."
    }
  }

  /// Whether `path` names a database server (the outbox on PostgreSQL), not a file: the advice
  /// differs.
  static func isServer(_ path: String) -> Bool {
    path.hasPrefix("postgresql://") || path.hasPrefix("postgres://")
  }

  /// The text with control characters escaped, so a message stays on one line.
  static func escaped(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
      if scalar.properties.generalCategory == .control {
        result += "\\u{" + String(scalar.value, radix: 16) + "}"
      } else {
        result.unicodeScalars.append(scalar)
      }
    }
    return result
  }
}
