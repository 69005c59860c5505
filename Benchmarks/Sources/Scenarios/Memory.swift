#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Bytes currently allocated by malloc in this process.
public func allocatedBytes() -> Int {
  #if canImport(Glibc)
    return Int(mallinfo2().uordblks)
  #elseif canImport(Darwin)
    var statistics = malloc_statistics_t()
    malloc_zone_statistics(nil, &statistics)
    return Int(statistics.size_in_use)
  #else
    return 0
  #endif
}
