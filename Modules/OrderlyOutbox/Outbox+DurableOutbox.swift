// The SQLite outbox as a DurableOutbox: what code written for any store calls.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import OrderlyDatabaseFile
import OrderlyOutboxCore

extension Outbox: DurableOutbox {
  /// The file's name without its extension (`orders` for `/var/lib/orders.sqlite`), or
  /// `outbox` for an outbox in memory or in a database opened without a path.
  public var defaultName: String {
    path.map { URL(fileURLWithPath: $0).deletingPathExtension().lastPathComponent } ?? "outbox"
  }
}

extension OutboxError {
  /// The file check's refusal, as an outbox error.
  init(_ error: DatabaseFileError) {
    switch error {
    case .cannotOpen(let path, let reason): self = .cannotOpen(path: path, reason: reason)
    case .refused(let path, let reason): self = .notAnOutbox(path: path, reason: reason)
    case .damaged(let path, let reason): self = .damaged(path: path, reason: reason)
    case .busy(let path, let waited): self = .busy(path: path, waited: waited)
    }
  }
}
#endif
