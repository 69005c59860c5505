// The PostgreSQL outbox's tables, created and checked when an outbox opens.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Logging
import OrderlyOutboxCore
import PostgresNIO

/// The name of one of the outbox's tables or indexes, written into a statement as it is: never a
/// parameter, and never from input.
struct SQLName: Sendable, Hashable, CustomStringConvertible {
  /// The name as PostgreSQL reads it.
  let description: String
}

extension PostgresQuery.StringInterpolation {
  /// Writes a table's or an index's name into the statement as it is (a `PostgresQuery`
  /// interpolation binds anything else as a parameter).
  mutating func appendInterpolation(_ name: SQLName) {
    appendInterpolation(unescaped: name.description)
  }
}

/// The outbox's tables and indexes on PostgreSQL, named once: every statement of the module
/// writes `\(Table.message)`, in a `PostgresQuery` or in a `String` alike.
enum Table {
  static let schema = SQLName(description: "orderly_outbox_schema")
  static let line = SQLName(description: "orderly_outbox_line")
  static let lease = SQLName(description: "orderly_outbox_lease")
  static let message = SQLName(description: "orderly_outbox_message")
  static let deadLetter = SQLName(description: "orderly_outbox_dead_letter")
  /// The audit trail's rows (see `PostgresAudit`).
  static let audit = SQLName(description: "orderly_outbox_audit")
  /// Where the audit trail began, per line.
  static let auditStart = SQLName(description: "orderly_outbox_audit_start")
  /// The messages by their append time alone.
  static let ageIndex = SQLName(description: "orderly_outbox_message_appended")
  /// The age index of outboxes created before `ageIndex`.
  static let formerAgeIndex = SQLName(description: "orderly_outbox_message_age")
  /// The messages of a line by entity, for merging.
  static let entityIndex = SQLName(description: "orderly_outbox_message_entity")
  /// The pending messages by unique key: the index that holds a key while its message waits.
  static let uniqueIndex = SQLName(description: "orderly_outbox_message_unique")
  /// The unique keys held for a window after their append, delivered or not.
  static let uniqueWindow = SQLName(description: "orderly_outbox_unique_window")
  /// The recurring schedules, by name (times in whole milliseconds since 1970).
  static let schedule = SQLName(description: "orderly_outbox_schedule")
  /// The rate limits' counters, one row each: its current window (milliseconds since 1970, on
  /// the database server's clock; a newer one replaces it) and the deliveries begun in it.
  static let rateWindow = SQLName(description: "orderly_outbox_rate_window")
}

/// The outbox's tables on PostgreSQL, and the check that a database holds them (or nothing of
/// theirs) before the outbox uses it.
///
/// - `orderly_outbox_line`: one row per line (partition key) that ever had a message, with the
///   last sequence number handed out. An append updates its line's row, so the row's lock
///   orders the appenders of one line: the second waits for the first to commit, and then takes
///   the next number. Numbers of one line therefore commit in order, and a worker that reads a
///   line's lowest number never skips a message that a slower transaction commits later.
/// - `orderly_outbox_lease`: who delivers each line (owner, expiry, fence) and whether the line
///   is paused. A separate row from the line's, so that a long transaction that appends never
///   holds up a worker that renews its lease.
/// - `orderly_outbox_message`: the pending messages, keyed by line and sequence.
/// - `orderly_outbox_dead_letter`: messages whose delivery failed for good, with the reason.
/// - `orderly_outbox_schema`: the schema's version, so a newer layout is refused, not misread.
enum PostgresSchema {
  /// 2 added `orderly_outbox_message.not_before` (`deliverAfter:`); a database at 1 is
  /// upgraded when a worker opens it.
  static let version = 2
  static let schemaTable = Table.schema.description
  static let lineTable = Table.line.description
  static let leaseTable = Table.lease.description
  static let messageTable = Table.message.description
  static let deadLetterTable = Table.deadLetter.description
  static let tables = [schemaTable, lineTable, leaseTable, messageTable, deadLetterTable]
  /// The columns each table had since schema version 1, in the order they were created: a table
  /// without one of them was not created by Orderly.
  static let requiredColumns: [String: [String]] = [
    schemaTable: ["version", "created_at"],
    lineTable: ["line", "last_sequence"],
    leaseTable: ["line", "owner", "expires_at", "fence", "paused"],
    messageTable: [
      "line", "sequence", "id", "partition", "entity", "payload", "attempts", "appended_at",
      "headers",
    ],
    deadLetterTable: [
      "line", "sequence", "id", "partition", "entity", "payload", "attempts", "appended_at",
      "headers", "failed_at", "reason",
    ],
  ]
  /// The channel appends notify, so idle workers look at once.
  static let channel = "orderly_outbox"

  static let create: [PostgresQuery] = [
    """
    CREATE TABLE \(Table.schema) (
      version integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE \(Table.line) (
      line text PRIMARY KEY,
      last_sequence bigint NOT NULL
    )
    """,
    """
    CREATE TABLE \(Table.lease) (
      line text PRIMARY KEY,
      owner text,
      expires_at timestamptz NOT NULL,
      fence bigint NOT NULL,
      paused boolean NOT NULL DEFAULT false
    )
    """,
    """
    CREATE TABLE \(Table.message) (
      line text NOT NULL,
      sequence bigint NOT NULL,
      id uuid NOT NULL,
      partition text,
      entity text,
      payload bytea NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      appended_at timestamptz NOT NULL,
      headers text,
      not_before timestamptz,
      unique_key text,
      PRIMARY KEY (line, sequence)
    )
    """,
    """
    CREATE INDEX \(Table.entityIndex) ON \(Table.message) (line, entity, sequence)
      WHERE entity IS NOT NULL
    """,
    ageIndex,
    """
    CREATE TABLE \(Table.deadLetter) (
      line text NOT NULL,
      sequence bigint NOT NULL,
      id uuid NOT NULL UNIQUE,
      partition text,
      entity text,
      payload bytea NOT NULL,
      attempts integer NOT NULL,
      appended_at timestamptz NOT NULL,
      headers text,
      failed_at timestamptz NOT NULL,
      reason text NOT NULL,
      PRIMARY KEY (line, sequence)
    )
    """,
  ]

  /// What unique keys, quarantine, recurring schedules and rate limits need: the pending messages' keys under a unique index
  /// (partial: a message without a key is not in it, and pays nothing for it), the keys held
  /// for a window, and why a paused line was quarantined.
  ///
  /// Added in place to an outbox created before them, by the first worker that opens it, as
  /// the audit trail's tables: an earlier worker reads and writes the tables as before (it never
  /// sets a key or a reason), so the schema's version is unchanged. Each statement can run
  /// again; the columns they add (``additionsColumns``) say whether they all ran.
  static let additions: [PostgresQuery] = [
    "ALTER TABLE \(Table.message) ADD COLUMN IF NOT EXISTS unique_key text",
    """
    CREATE UNIQUE INDEX IF NOT EXISTS \(Table.uniqueIndex) ON \(Table.message) (unique_key)
      WHERE unique_key IS NOT NULL
    """,
    """
    CREATE TABLE IF NOT EXISTS \(Table.uniqueWindow) (
      key text PRIMARY KEY,
      id uuid NOT NULL,
      sequence bigint NOT NULL,
      until timestamptz NOT NULL
    )
    """,
    """
    CREATE INDEX IF NOT EXISTS orderly_outbox_unique_window_until
      ON \(Table.uniqueWindow) (until)
    """,
    "ALTER TABLE \(Table.lease) ADD COLUMN IF NOT EXISTS pause_reason text",
    """
    CREATE TABLE IF NOT EXISTS \(Table.schedule) (
      name text PRIMARY KEY,
      rule text NOT NULL,
      zone text NOT NULL,
      partition text,
      payload bytea NOT NULL,
      headers text,
      missed text NOT NULL,
      paused boolean NOT NULL DEFAULT false,
      anchor bigint NOT NULL,
      count_from bigint NOT NULL,
      last_tick bigint
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS \(Table.rateWindow) (
      bucket text PRIMARY KEY,
      start bigint NOT NULL,
      until bigint NOT NULL,
      capacity integer NOT NULL,
      used integer NOT NULL,
      granted integer NOT NULL
    )
    """,
  ]
  /// The columns ``additions`` adds, by table: all there, and so is the rest.
  static let additionsColumns = [
    (table: messageTable, column: "unique_key"), (table: leaseTable, column: "pause_reason"),
    (table: Table.uniqueWindow.description, column: "until"),
    (table: Table.schedule.description, column: "last_tick"),
    (table: Table.rateWindow.description, column: "used"),
  ]

  /// The messages by age, so a worker finds the lines whose oldest message waits longest
  /// without reading every line.
  ///
  /// Added in place to an outbox created before it, by the first worker that opens it
  /// (``prepare(_:creatingTables:logger:)``), without a new schema version: it changes no table,
  /// and an earlier worker reads the tables as before.
  ///
  /// The append time alone, not the line and sequence after it: an index that starts with the
  /// time but holds the line too can answer a lookup by line, by reading itself from the start.
  /// When the table's statistics call it empty (an autovacuum that ran the moment the queue
  /// had drained), PostgreSQL costs that read like a probe of the primary key, and it took the
  /// age index for the worker's lookups by line.
  static let ageIndexName = Table.ageIndex.description
  static let ageIndex: PostgresQuery = """
    CREATE INDEX \(Table.ageIndex) ON \(Table.message) (appended_at)
    """
  /// The age index of outboxes created before ``ageIndexName``, dropped by the first worker
  /// that creates its successor.
  static let formerAgeIndexName = Table.formerAgeIndex.description

  // deadline: the caller's
  /// Creates the tables in an empty database (in the schema first on its `search_path`), or
  /// checks the ones there.
  ///
  /// Runs in one transaction under an advisory lock, so that workers starting together create
  /// the tables once.
  ///
  /// - Parameters:
  ///   - client: The client to query with.
  ///   - creatingTables: Whether a database without the tables gets them; when false, such a
  ///     database is refused and left untouched.
  ///   - logger: Where queries log.
  /// - Returns: Why the database cannot be used, or `nil` if it can.
  /// - Throws: The database's error, when a query fails.
  static func prepare(_ client: PostgresClient, creatingTables: Bool = true, logger: Logger)
    async throws -> String?
  {
    try await client.transaction(logger: logger) { connection -> String? in
      try await connection.query(
        "SELECT pg_advisory_xact_lock(hashtext('\(Table.schema)'))",
        logger: logger
      )
      let names = tables
      var present: [String] = []
      let rows = try await connection.query(
        """
        SELECT table_name::text FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_name = ANY(\(names))
        """,
        logger: logger
      )
      for try await name in rows.decode(String.self) { present.append(name) }
      if present.isEmpty, !creatingTables {
        return "it holds no Orderly outbox (no orderly_outbox_* tables in its current schema): "
          + "check the URL's database, or start a worker to create the outbox"
      }
      if present.isEmpty {
        for statement in create + additions + PostgresAudit.create {
          try await connection.query(statement, logger: logger)
        }
        try await connection.query(
          "INSERT INTO \(Table.schema) (version) VALUES (\(version))",
          logger: logger
        )
        return nil
      }
      guard present.contains(schemaTable) else {
        let others = present.sorted().joined(separator: ", ")
        return "it has tables named like the outbox's (\(others)) that Orderly did not create "
          + "(there is no \(schemaTable) table): give the outbox a database or schema of its own"
      }
      // Read from the catalog, not by querying them: a table of another program's, named like
      // one of the outbox's, must give this answer, not a failed query.
      var columns: [String: Set<String>] = [:]
      for try await row in try await connection.query(
        """
        SELECT table_name::text AS table_name, column_name::text AS column_name
        FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = ANY(\(names))
        """,
        logger: logger
      ) {
        let row = NamedColumns(row)
        columns[try row("table_name"), default: []].insert(try row("column_name"))
      }
      func foreign(_ table: String) -> String? {
        let lacking = (requiredColumns[table] ?? []).filter { !(columns[table] ?? []).contains($0) }
        guard let first = lacking.first else { return nil }
        return "it has a table named like the outbox's (\(table)) that Orderly did not create "
          + "(it has no column \(first)): give the outbox a database or schema of its own"
      }
      if let problem = foreign(schemaTable) { return problem }
      var found: Int?
      for try await value in try await connection.query(
        "SELECT max(version) FROM \(Table.schema)",
        logger: logger
      ).decode(Int?.self) {
        found = value
      }
      guard let found else {
        return "its \(schemaTable) table is empty: it was not created by Orderly, or was emptied"
      }
      if found > version {
        return "its outbox tables were written by a newer version of Orderly (schema version "
          + "\(found); this version knows \(version)): upgrade Orderly on this worker"
      }
      for table in present.sorted() {
        if let problem = foreign(table) { return problem }
      }
      let missing = tables.filter { !present.contains($0) }
      if !missing.isEmpty {
        return "its outbox tables are incomplete (missing \(missing.joined(separator: ", "))): "
          + "restore them, or use a new database"
      }
      if creatingTables {
        // The age index, missing in an outbox created before it, and the former one, dropped.
        // Looked up first: a `CREATE INDEX IF NOT EXISTS` would lock the messages against
        // writes even when the index is there.
        var indexes: Set<String> = []
        for try await name in try await connection.query(
          """
          SELECT indexname::text FROM pg_indexes
          WHERE schemaname = current_schema()
            AND indexname = ANY(\([ageIndexName, formerAgeIndexName]))
          """,
          logger: logger
        ).decode(String.self) {
          indexes.insert(name)
        }
        if !indexes.contains(ageIndexName) { try await connection.query(ageIndex, logger: logger) }
        if indexes.contains(formerAgeIndexName) {
          try await connection.query("DROP INDEX \(Table.formerAgeIndex)", logger: logger)
        }
        // The audit trail's tables, missing in an outbox created before them; looked up first,
        // as the index.
        var audited = false
        for try await present in try await connection.query(
          "SELECT to_regclass('\(Table.auditStart)') IS NOT NULL",
          logger: logger
        ).decode(Bool.self) {
          audited = present
        }
        if !audited {
          for statement in PostgresAudit.create {
            try await connection.query(statement, logger: logger)
          }
        }
        // The unique keys' column, index and table and the quarantine's column, missing in an
        // outbox created before them; looked up first, as the index.
        var found = 0
        for try await _ in try await connection.query(
          """
          SELECT 1 FROM information_schema.columns
          WHERE table_schema = current_schema()
            AND (table_name, column_name) IN (SELECT * FROM unnest(
              \(additionsColumns.map(\.table))::text[], \(additionsColumns.map(\.column))::text[]))
          """,
          logger: logger
        ) {
          found += 1
        }
        if found < additionsColumns.count {
          for statement in additions {
            try await connection.query(statement, logger: logger)
          }
        }
      }
      if found < 2 {
        // Version 1 to 2: the not-before time of a message appended with one.
        try await connection.query(
          "ALTER TABLE \(Table.message) ADD COLUMN IF NOT EXISTS not_before timestamptz",
          logger: logger
        )
        try await connection.query(
          "INSERT INTO \(Table.schema) (version) VALUES (2)",
          logger: logger
        )
      }
      return nil
    }
  }
}
#endif
