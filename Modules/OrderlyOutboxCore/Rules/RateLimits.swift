// Rate limits per key and per group of keys (issue "What every job queue has", item 3): the
// decision, in values with no clock or store. A store keeps each window's count in a table every
// worker shares, reads its own clock (the database server's, for a fleet), and asks
// `RateLimits.grant` how many deliveries a line may begin now; the line runner asks before each
// claim.
package import Foundation

/// At most `count` deliveries per interval, for each key, for one key, or for every key with a
/// prefix together (a tenant's keys), across every process that delivers the outbox.
///
/// Set on the delivery options (``DeliveryOptions/rateLimits``). Windows are fixed on the
/// interval (from 1970, on the store's clock: the database server's for a fleet), so every
/// worker counts in the same window, and no more than `count` deliveries begin in one. A line
/// whose limit is reached waits, in order, until the window ends; other lines go on.
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
  /// Which keys a limit counts.
  public enum Keys: Sendable, Equatable {
    /// Every key on its own: each gets `count` per interval.
    case each
    /// One key (`nil`: the default line).
    case key(String?)
    /// Every key that starts with the prefix, together: all of them share `count` (a tenant).
    case prefix(String)
  }

  /// How many deliveries may begin in one window.
  public let count: Int
  /// The window, in whole milliseconds.
  package let milliseconds: Int64
  /// Which keys it counts.
  public let keys: Keys

  /// The window.
  public var interval: Duration { .milliseconds(milliseconds) }

  /// `5 per 1000 ms for each key`, `100 per 60000 ms for keys starting with acme:`.
  public var description: String {
    let which =
      switch keys {
      case .each: "each key"
      case .key(let key): "key \(key ?? "(default)")"
      case .prefix(let prefix): "keys starting with \(prefix)"
      }
    return "\(count) per \(milliseconds) ms for \(which)"
  }

  /// A limit, refused when it cannot be kept.
  ///
  /// - Parameters:
  ///   - count: Deliveries per window; 1 or more.
  ///   - interval: The window: whole milliseconds, from 1 millisecond to a day.
  ///   - keys: Which keys it counts; a prefix is not empty.
  /// - Throws: ``OutboxError/invalidOption(_:)`` saying what is wrong.
  public init(_ count: Int, per interval: Duration, keys: Keys) throws(OutboxError) {
    guard count >= 1 else {
      throw .invalidOption("a rate limit allows 1 delivery or more per interval (got \(count))")
    }
    let parts = interval.components
    guard parts.attoseconds % 1_000_000_000_000_000 == 0 else {
      throw .invalidOption("a rate limit's interval is whole milliseconds (got \(interval))")
    }
    let milliseconds = parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    guard milliseconds >= 1, milliseconds <= 86_400_000 else {
      throw .invalidOption(
        "a rate limit's interval is from 1 millisecond to 1 day (got \(interval))"
      )
    }
    if case .prefix(let prefix) = keys, prefix.isEmpty {
      throw .invalidOption(
        "a rate limit's key prefix is not empty (use .each to limit every key on its own)"
      )
    }
    self.count = count
    self.milliseconds = milliseconds
    self.keys = keys
  }

  /// Whether the limit counts the key `partition`.
  package func counts(_ partition: String?) -> Bool {
    switch keys {
    case .each: true
    case .key(let key): key == partition
    case .prefix(let prefix): partition?.hasPrefix(prefix) == true
    }
  }

  /// The name of the counter the key's deliveries go to: one per key for `.each`, one for the
  /// whole group for `.prefix`; the limit's numbers are in it, so two limits never share one.
  package func bucket(for partition: String?) -> String {
    let shape = "\(count)/\(milliseconds)ms"
    switch keys {
    case .each, .key: return "key \(shape) " + LineKey.key(partition)
    case .prefix(let prefix): return "prefix \(shape) " + prefix
    }
  }
}

/// One window of one limit's counter, as a store keeps it.
package struct RateWindow: Sendable, Equatable {
  /// The counter (``RateLimit/bucket(for:)``).
  package let bucket: String
  /// When the window began, in milliseconds since 1970: a multiple of the interval.
  package let start: Int64
  /// When it ends, and the next begins.
  package let end: Int64
  /// How many deliveries may begin in it.
  package let capacity: Int
}

/// How many deliveries a line may begin now, and until when it waits if none.
package struct RateGrant: Sendable, Equatable {
  /// Deliveries granted (taken from every window that counts the key).
  package let granted: Int
  /// When a window that held the grant back ends (milliseconds since 1970), if any did: the
  /// line waits until then for more.
  package let until: Int64?
  /// When the permits it grants stop counting.
  ///
  /// The end of the earliest window they were counted in (milliseconds since 1970); `nil` when
  /// no window counted them. A delivery that begins later takes its permit again, in the window
  /// it begins in.
  package let lapses: Int64?

  /// A grant.
  ///
  /// - Parameters:
  ///   - granted: Deliveries granted.
  ///   - until: When the window that held it back ends, if one did.
  ///   - lapses: When the windows the permits were counted in begin to end.
  package init(granted: Int, until: Int64?, lapses: Int64? = nil) {
    self.granted = granted
    self.until = until
    self.lapses = lapses
  }
}

/// The rate-limit decisions every store makes the same way.
package enum RateLimits {
  /// The windows that count a key's deliveries at `now`: one per limit that counts it.
  ///
  /// Windows are fixed (aligned on the interval, from 1970), so every worker that reads the
  /// same clock counts in the same window: never more than the limit's count begins in one.
  ///
  /// - Parameters:
  ///   - partition: The key.
  ///   - limits: The limits delivery started with.
  ///   - now: The store's clock, in milliseconds since 1970.
  /// - Returns: The windows; none for a key no limit counts.
  package static func windows(for partition: String?, limits: [RateLimit], at now: Int64)
    -> [RateWindow]
  {
    limits.filter { $0.counts(partition) }.map { limit in
      let start = now - ((now % limit.milliseconds) + limit.milliseconds) % limit.milliseconds
      return RateWindow(
        bucket: limit.bucket(for: partition),
        start: start,
        end: start + limit.milliseconds,
        capacity: limit.count
      )
    }
  }

  /// When a key whose counters are full goes on: the latest end of the full windows that
  /// count it, or `nil` if none does.
  ///
  /// - Parameters:
  ///   - partition: The key.
  ///   - full: The counters whose current window is full, with when each ends.
  /// - Returns: The time, or `nil`.
  package static func heldUntil(
    _ partition: String?,
    full: [(bucket: String, until: Int64)]
  ) -> Date? {
    let lineKey = LineKey.key(partition)
    var latest: Int64?
    for window in full {
      // `key SHAPE LINEKEY` or `prefix SHAPE PREFIX` (``RateLimit/bucket(for:)``).
      let parts = window.bucket.split(
        separator: " ",
        maxSplits: 2,
        omittingEmptySubsequences: false
      )
      guard parts.count == 3 else { continue }
      let counts =
        parts[0] == "key"
        ? parts[2] == lineKey : parts[0] == "prefix" && partition?.hasPrefix(parts[2]) == true
      if counts { latest = max(latest ?? window.until, window.until) }
    }
    return latest.map { Date(timeIntervalSince1970: Double($0) / 1000) }
  }

  /// How many of `wanting` deliveries may begin, given how many each window counted already.
  ///
  /// - Parameters:
  ///   - wanting: How many the line would begin (a batch).
  ///   - windows: The key's windows.
  ///   - used: How many each window counted, in the same order.
  /// - Returns: The grant: as many as the fullest window leaves, and when the earliest window
  ///   that held it back ends.
  package static func grant(wanting: Int, windows: [RateWindow], used: [Int]) -> RateGrant {
    var granted = max(0, wanting)
    for (window, count) in zip(windows, used) {
      granted = min(granted, max(0, window.capacity - count))
    }
    let lapses = windows.map(\.end).min()
    guard granted < wanting else {
      return RateGrant(granted: granted, until: nil, lapses: lapses)
    }
    // Held back: the line may begin more once every window that is full has ended; the one
    // that holds it longest decides.
    let full = zip(windows, used).filter { $0.0.capacity - $0.1 <= granted }.map(\.0.end)
    return RateGrant(granted: granted, until: full.max(), lapses: lapses)
  }
}
