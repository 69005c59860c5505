// The file lock that gives one process at a time the right to deliver a SQLite outbox.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import OrderlyCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The right to deliver one outbox file: an exclusive `flock` on the file `PATH-deliverer`
/// beside it.
///
/// At most one outbox, in any process, holds it at a time. The kernel releases it when its
/// holder closes it or dies, however it dies (`SIGKILL` included), so a killed deliverer never
/// blocks the file. The lock file is never removed: removing it while another process waits on
/// it would let two processes each lock a file of that name.
final class DelivererLock: Sendable {
  /// The lock file of the outbox at `path`.
  static func path(for outboxPath: String) -> String { outboxPath + "-deliverer" }

  /// The open lock file, or -1 once released.
  private let descriptor: OrderlyLock<Int32>

  private init(descriptor: Int32) {
    self.descriptor = OrderlyLock(descriptor)
  }

  /// Takes the lock if nobody holds it.
  ///
  /// - Parameter outboxPath: The outbox's database file.
  /// - Returns: The lock, or `nil` if another outbox holds it.
  /// - Throws: `OutboxError.cannotOpen(path:reason:)` if the lock file cannot be created.
  static func acquire(for outboxPath: String) throws(OutboxError) -> DelivererLock? {
    let path = Self.path(for: outboxPath)
    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else {
      throw .cannotOpen(
        path: outboxPath,
        reason: "cannot create its deliverer lock \(path): \(String(cString: strerror(errno)))"
      )
    }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      close(descriptor)
      return nil
    }
    return DelivererLock(descriptor: descriptor)
  }

  /// Gives the lock up; later calls do nothing.
  func release() {
    let open = descriptor.withLock(announcingTo: self) { descriptor -> Int32 in
      defer { descriptor = -1 }
      return descriptor
    }
    // Closing the file releases the lock.
    if open >= 0 { close(open) }
  }

  deinit { release() }
}
#endif
