internal import CMallocInfo

/// Bytes currently allocated by malloc in this process.
public func allocatedBytes() -> Int {
  Int(cmallocinfo_allocated_bytes())
}
