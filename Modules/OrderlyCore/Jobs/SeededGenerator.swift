/// A small seeded random number generator (SplitMix64), so runs with the same seed repeat
/// exactly: for the in-memory services' latency and failures, and for the package's tests.
///
/// Package-wide, not public: Orderly's API takes seeds, not generators.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
  private var state: UInt64

  /// Creates a generator; the same seed gives the same sequence.
  ///
  /// - Parameter seed: The seed.
  package init(seed: UInt64) {
    state = seed
  }

  /// The next number of the sequence.
  ///
  /// - Returns: 64 random bits.
  package mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in 0 ..< 1.
  ///
  /// - Returns: A uniformly distributed `Double` from 53 random bits.
  package mutating func nextUnit() -> Double {
    Double(next() >> 11) / Double(UInt64(1) << 53)
  }
}
