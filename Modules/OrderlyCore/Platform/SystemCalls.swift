#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The operating system calls of the stall watchdog (``StallWatchdog``), which runs on a thread
/// of its own and must not depend on Foundation or on the cooperative pool it watches.
///
/// Part of the platform room: the C library differs between Apple systems and Linux.
enum SystemCalls {
  /// The value of the environment variable `name`, if it is set.
  static func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
  }

  /// The process's identifier.
  static var processID: Int32 { getpid() }

  /// Standard error's file descriptor.
  static var standardError: Int32 { STDERR_FILENO }

  /// Opens `path` for appending, creating it if needed.
  ///
  /// - Returns: The file descriptor, or `nil` if the file cannot be opened.
  static func openForAppending(_ path: String) -> Int32? {
    let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
    return opened >= 0 ? opened : nil
  }

  /// Writes `text` to `descriptor` in one call (a report line is short: one `write` keeps
  /// concurrent writers' lines whole).
  static func writeText(_ text: String, to descriptor: Int32) {
    _ = text.withCString { write(descriptor, $0, strlen($0)) }
  }

  /// A monotonic time, in nanoseconds.
  static func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
  }

  /// Blocks the calling thread for `microseconds`.
  static func sleep(microseconds: UInt32) {
    usleep(microseconds)
  }

  /// Whether ``appendThreadStacks(to:)`` can take the stacks: on Linux, where `gdb` may attach
  /// to the process.
  static var takesThreadStacks: Bool {
    #if os(Linux)
    true
    #else
    false
    #endif
  }

  /// Appends every thread's stack to the file at `path`, taken with `gdb` (see
  /// ``takesThreadStacks``).
  static func appendThreadStacks(to path: String) {
    #if os(Linux)
    _ = system("gdb -p \(getpid()) -batch -ex 'thread apply all bt 30' >> '\(path)' 2>&1")
    #else
    // `system` is unavailable on iOS, tvOS and watchOS; `takesThreadStacks` is false here.
    _ = path
    #endif
  }
}
