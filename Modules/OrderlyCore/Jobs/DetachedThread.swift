#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts detached POSIX threads: the threads of ``DedicatedThreadExecutor`` and of the stall
/// watchdog, which must never be cooperative-pool threads.
enum DetachedThread {
  /// The work a thread runs, boxed so it can travel through `pthread_create`'s context pointer.
  private final class Work {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
  }

  /// Starts a detached thread that runs `body`.
  ///
  /// - Parameter body: The thread's work; it holds what it captures until it returns.
  /// - Returns: `pthread_create`'s result: 0 when the thread started.
  static func start(_ body: @escaping @Sendable () -> Void) -> Int32 {
    // Passed retained, released by the thread (or here, if no thread started).
    let context = Unmanaged.passRetained(Work(body)).toOpaque()
    #if canImport(Darwin)
    var thread: pthread_t?
    let created = pthread_create(
      &thread,
      nil,
      { context in
        Unmanaged<Work>.fromOpaque(context).takeRetainedValue().body()
        return nil
      },
      context
    )
    if created == 0, let thread { pthread_detach(thread) }
    #else
    var thread = pthread_t()
    let created = pthread_create(
      &thread,
      nil,
      { context in
        guard let context else { return nil }
        Unmanaged<Work>.fromOpaque(context).takeRetainedValue().body()
        return nil
      },
      context
    )
    if created == 0 { pthread_detach(thread) }
    #endif
    if created != 0 { Unmanaged<Work>.fromOpaque(context).release() }
    return created
  }
}
