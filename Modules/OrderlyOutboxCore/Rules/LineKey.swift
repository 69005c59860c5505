// A line's key in a store's tables.
//
/// A line's key in a store's tables: the partition key behind a prefix, or the empty string for
/// the default line, so that no partition key can be mistaken for the default line.
package enum LineKey {
  /// The key of `partition`'s line.
  package static func key(_ partition: String?) -> String {
    partition.map { "p:" + $0 } ?? ""
  }

  /// The partition a line's key stands for (`nil`: the default line).
  package static func partition(_ key: String) -> String? {
    key.hasPrefix("p:") ? String(key.dropFirst(2)) : nil
  }

  /// A line as logs name it: its partition key, or `(default)`.
  package static func shown(_ key: String) -> String {
    partition(key) ?? "(default)"
  }
}
