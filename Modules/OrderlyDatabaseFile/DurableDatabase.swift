package import GRDB

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
    configuration.busyMode = .timeout(busyTimeout / .seconds(1))
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
