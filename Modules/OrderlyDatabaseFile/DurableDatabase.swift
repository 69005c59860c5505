// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
package import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How Orderly opens and closes a database file it writes: WAL mode, every commit synced, and
/// the file whole on its own once closed.
package enum DurableDatabase {
  /// Opens a `DatabasePool` on `path` whose writes are on disk once they return.
  ///
  /// `synchronous = FULL` is set on the writer connection after the pool is open: GRDB sets
  /// `synchronous = NORMAL` when it turns WAL mode on, after `prepareDatabase` ran, and NORMAL
  /// syncs the WAL only at checkpoints (a commit survives the process being killed, not a power
  /// cut).
  ///
  /// - Parameters:
  ///   - path: The database file.
  ///   - busyTimeout: How long a connection waits for another one's lock.
  /// - Returns: The open pool.
  /// - Throws: GRDB's error if the file cannot be opened.
  package static func openPool(path: String, busyTimeout: Duration) throws -> DatabasePool {
    var configuration = Configuration()
    configuration.busyMode = busyMode(waitingUpTo: busyTimeout)
    // Opening a pool switches the file to WAL mode and writes to it (GRDB makes sure a `-wal`
    // exists). Two processes opening one new file at once can meet there, and SQLite then
    // answers SQLITE_BUSY at once, without the busy handler (a change of journal mode, or a
    // WAL being recovered): seen as two shells creating one notes file side by side, both
    // refused in well under the busy timeout. Such an open is tried again until the timeout.
    let deadline = ContinuousClock.now + busyTimeout
    while true {
      do {
        let pool = try DatabasePool(path: path, configuration: configuration)
        do {
          try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
          }
        } catch {
          try? pool.close()
          throw error
        }
        return pool
      } catch let error as DatabaseError
        where (error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED)
        && ContinuousClock.now < deadline
      {
        usleep(5_000)
      }
    }
  }

  /// How a connection waits for another connection's lock: it tries again every few
  /// milliseconds, for at least `timeout`.
  ///
  /// SQLite's own busy timeout sleeps up to 100 ms between tries. Against another process that
  /// writes one short transaction after another, nearly every try lands inside one of them, and
  /// a writer could wait out the whole timeout while the database was free most of the time
  /// between them (a shell adding hundreds of notes beside another one failed that way on a
  /// busy machine). Trying every 1 ms at first, then every 5 ms, takes the lock in one of those
  /// gaps. The time counted is the time slept, so a process that is descheduled waits longer,
  /// never shorter.
  ///
  /// - Parameter timeout: How long to wait before the write fails with `SQLITE_BUSY`.
  /// - Returns: The busy mode for GRDB's configuration.
  package static func busyMode(waitingUpTo timeout: Duration) -> Database.BusyMode {
    let limit = Int64(timeout / .milliseconds(1))
    return .callback { tries in
      // Milliseconds slept before this try: 1 ms for each of the first 10, then 5 ms each.
      let slept = Int64(min(tries, 10)) + Int64(max(tries - 10, 0)) * 5
      guard slept < limit else { return false }
      usleep(tries < 10 ? 1_000 : 5_000)
      return true
    }
  }

  /// The writer connection's `synchronous` setting (0 off, 1 normal, 2 full, 3 extra).
  package static func synchronousLevel(of database: any DatabaseWriter) throws -> Int {
    try database.writeWithoutTransaction { db in
      try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? 0
    }
  }

  /// Moves everything the `-wal` file holds into the database file, empties the `-wal`, and
  /// closes the database: a copy or backup of the database file alone is then complete.
  ///
  /// The checkpoint is skipped (and the `-wal` kept, as SQLite needs it) while another
  /// connection, in this process or another, still reads the database.
  ///
  /// - Parameter database: The database to close.
  /// - Throws: GRDB's error if a statement still runs on it.
  package static func checkpointAndClose(_ database: any DatabaseWriter) throws {
    guard database is DatabasePool else {
      try database.close()
      return
    }
    let path = database.path
    try? database.writeWithoutTransaction { db in
      _ = try db.checkpoint(.truncate)
    }
    try database.close()
    // GRDB closes the writer before the readers, and a read-only reader closing last cannot
    // remove the `-wal` and `-shm` files. A connection of our own, closed last, does: SQLite's
    // last connection to a WAL database checkpoints it and removes both (unless another
    // process still has the file open).
    if let last = try? DatabaseQueue(path: path) {
      _ = try? last.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_master") }
      try? last.close()
    }
  }
}
#endif
