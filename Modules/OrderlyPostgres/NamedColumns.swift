// Rows read by column name, never by position.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import PostgresNIO

/// A row whose columns are read by the names the statement gives them.
///
/// A statement's select list can be reordered, or a column added, without a read taking the
/// wrong column: a name the row does not have is an error that names it and the columns the row
/// has, not a value from another column.
struct NamedColumns {
  private let row: PostgresRandomAccessRow

  /// Reads `row` by name.
  init(_ row: PostgresRow) {
    self.row = row.makeRandomAccess()
  }

  /// The value of `column`, decoded as `T` (an optional type for a column that may be `NULL`).
  ///
  /// - Throws: ``MissingColumn`` when the row has no such column; PostgresNIO's decoding error
  ///   when the value is not a `T`.
  func callAsFunction<T: PostgresDecodable>(_ column: String, as _: T.Type = T.self) throws -> T {
    guard row.contains(column) else {
      throw MissingColumn(column: column, columns: row.map(\.columnName))
    }
    return try row[column].decode(T.self)
  }
}

/// A statement's row has no column of the name the code reads: the statement and the code that
/// reads it disagree.
struct MissingColumn: Error, CustomStringConvertible {
  /// The column read.
  let column: String
  /// The columns the row has, in order.
  let columns: [String]

  var description: String {
    "the row has no column \"\(column)\" (it has \(columns.joined(separator: ", "))): "
      + "the statement and the code reading it disagree; this is a defect in Orderly, please "
      + "report it"
  }
}

/// A stored value this version of Orderly cannot read: reported with where it is, never replaced
/// by a value it might have been.
struct UnreadableValue: Error, CustomStringConvertible {
  /// The table it is in.
  let table: String
  /// The row, as the table identifies it (`number 812`).
  let row: String
  /// The column.
  let column: String
  /// The value found.
  let value: String

  var description: String {
    "\(table), row \(row): \(column) is \"\(value)\", which this version of Orderly cannot read; "
      + "run the version that wrote it, or remove the row"
  }
}
#endif
