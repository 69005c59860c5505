#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts detached POSIX threads: the threads of ``DedicatedThreadExecutor`` and of the stall
/// watchdog, which must never be cooperative-pool threads.
///
/// Part of the platform room: the pthread types differ between Apple systems and Linux.
enum DetachedThread {
  /// The work a thread runs, boxed so it can travel through `pthread_create`'s context pointer.
  private final class Work {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
  }

  /// Starts a detached thread that runs `body`.
  ///
  /// - Parameters:
  ///   - name: A name for the thread, given where the platform lets a thread name itself from
  ///     Swift (Apple systems); `nil` for none.
  ///   - body: The thread's work; it holds what it captures until it returns.
  /// - Returns: `pthread_create`'s result: 0 when the thread started.
  static func start(named name: String? = nil, _ body: @escaping @Sendable () -> Void) -> Int32 {
    let work: @Sendable () -> Void = {
      if let name { nameCurrentThread(name) }
      body()
    }
    // Passed retained, released by the thread (or here, if no thread started).
    let context = Unmanaged.passRetained(Work(work)).toOpaque()
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

  /// Names the calling thread, where the platform allows it.
  private static func nameCurrentThread(_ name: String) {
    #if canImport(Darwin)
    _ = pthread_setname_np(name)
    #else
    // Elsewhere threads keep the process's name, as they always have here.
    _ = name
    #endif
  }
}
