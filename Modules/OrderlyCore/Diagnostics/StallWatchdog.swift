/// A debugging aid that says, with evidence, why queued work does not move: set the environment
/// variable `ORDERLY_STALL_WATCHDOG` before the process starts.
///
/// With it set, every queue created afterwards is watched from a thread of its own (never from
/// Swift's cooperative pool, which it also watches):
/// - **Stalled queues.** Once a second it reads each queue's state. A queue with jobs waiting
///   or running whose count of ended jobs has not moved for `ORDERLY_STALL_AFTER` seconds (10
///   by default) is reported with its state: the jobs in line and in the inbox, the running
///   jobs and what each is doing (granted but not begun, running), and whether a runner task is
///   alive. A granted job whose task never begins points at a lost wake-up or a starved pool; a
///   line with jobs and nothing running points at a lost hand-over.
/// - **A blocked pool.** A task on the cooperative pool sleeps 10 ms at a time; when it wakes
///   late, the pool's threads were busy or blocked (a synchronous wait on a cooperative thread:
///   a semaphore, a lock held long, a blocking read or sleep). The worst lateness is reported
///   whenever it grows past 100 ms, and at once when the pool has not run the timer for a
///   second.
///
/// The value says where reports go: `1` or `stderr` for standard error, anything else is a file
/// the reports are appended to. Reports are one line each, starting with `orderly-watchdog:` and
/// the process identifier. On Linux, with `ORDERLY_STALL_STACKS=1` as well, the first report of
/// a blocked pool or a stalled queue also appends every thread's stack, taken with `gdb`, to the
/// report file: the frames show what each cooperative thread was doing.
/// With the variable unset, a queue costs nothing more than one check of a flag when it is
/// created.
enum StallWatchdog {
  /// The running watchdog, if the environment asked for one.
  static let shared: Watcher? = {
    guard let target = SystemCalls.environment("ORDERLY_STALL_WATCHDOG"),
      !target.isEmpty, target != "0"
    else { return nil }
    let seconds = SystemCalls.environment("ORDERLY_STALL_AFTER").flatMap { Int($0) } ?? 10
    return Watcher(target: target, stallAfter: max(seconds, 1))
  }()

  /// Watches `core` from now on, if the watchdog runs.
  @inline(__always)
  static func register(_ core: JobQueueCore) {
    shared?.add(core)
  }

  /// The watchdog's thread and what it remembers between looks.
  final class Watcher: Sendable {
    private struct Watched {
      weak var core: JobQueueCore?
      var ended: UInt64
      var unchangedSince: UInt64
      var reported: Bool
    }

    private struct State {
      var queues: [ObjectIdentifier: Watched] = [:]
      /// When the pool's timer last fired, in monotonic nanoseconds.
      var heartbeat: UInt64
      var worstLateness: UInt64 = 0
      var reportedLateness: UInt64 = 0
      var poolReportedBlocked = false
    }

    private let state: OrderlyLock<State>
    private let descriptor: Int32
    private let stallAfter: UInt64

    init(target: String, stallAfter seconds: Int) {
      if target == "1" || target == "stderr" {
        descriptor = SystemCalls.standardError
      } else {
        descriptor = SystemCalls.openForAppending(target) ?? SystemCalls.standardError
      }
      stallAfter = UInt64(seconds) * 1_000_000_000
      state = OrderlyLock(State(heartbeat: Self.now()))
      report("watching queues (stall after \(seconds) s) in process \(SystemCalls.processID)")
      startThread()
      startPoolProbe()
    }

    func add(_ core: JobQueueCore) {
      let now = Self.now()
      state.withLock(announcingTo: self) { state in
        state.queues[ObjectIdentifier(core)] = Watched(
          core: core,
          ended: 0,
          unchangedSince: now,
          reported: false
        )
      }
    }

    private static func now() -> UInt64 {
      SystemCalls.monotonicNanoseconds()
    }

    private func report(_ line: String) {
      SystemCalls.writeText(
        "orderly-watchdog: [\(SystemCalls.processID)] \(line)\n",
        to: descriptor
      )
    }

    /// Whether the stacks were taken already: once per process is enough, and gdb is slow.
    private let tookStacks = OrderlyAtomic<Bool>(false)

    /// Appends every thread's stack to the report file, with gdb, once per process.
    private func reportStacks() {
      guard SystemCalls.takesThreadStacks,
        SystemCalls.environment("ORDERLY_STALL_STACKS") == "1",
        let target = SystemCalls.environment("ORDERLY_STALL_WATCHDOG"),
        target != "1", target != "stderr",
        !tookStacks.exchange(true, ordering: .relaxed)
      else { return }
      report("thread stacks follow (gdb)")
      SystemCalls.appendThreadStacks(to: target)
    }

    /// A task on the cooperative pool that sleeps 10 ms at a time and records how late it wakes.
    private func startPoolProbe() {
      Task.detached(priority: .medium) { [self] in
        while true {
          let before = Self.now()
          // A real sleep on purpose: how late the wall-clock timer fires is the measurement.
          try? await Task.sleep(nanoseconds: 10_000_000)
          let after = Self.now()
          let late = after &- before &- 10_000_000
          state.withLock(announcingTo: self) { state in
            state.heartbeat = after
            if late < 1 << 62, late > state.worstLateness { state.worstLateness = late }
          }
        }
      }
    }

    private func startThread() {
      if DetachedThread.start(named: "orderly.watchdog", { self.watch() }) != 0 {
        report("could not start its thread")
      }
    }

    /// Looks at every queue and at the pool once a second, forever.
    private func watch() {
      while true {
        SystemCalls.sleep(microseconds: 1_000_000)
        let now = Self.now()
        let cores = state.withLock(announcingTo: self) { state -> [JobQueueCore] in
          state.queues = state.queues.filter { $0.value.core != nil }
          return state.queues.values.compactMap(\.core)
        }
        var stalled: [String] = []
        for core in cores {
          let snapshot = core.diagnosticSnapshot()
          let isStalled = state.withLock(announcingTo: self) { state -> Bool in
            let key = ObjectIdentifier(core)
            guard var watched = state.queues[key] else { return false }
            defer { state.queues[key] = watched }
            if snapshot.ended != watched.ended || snapshot.isIdle {
              watched.ended = snapshot.ended
              watched.unchangedSince = now
              watched.reported = false
              return false
            }
            guard !watched.reported, now - watched.unchangedSince >= stallAfter else {
              return false
            }
            watched.reported = true
            return true
          }
          if isStalled { stalled.append(snapshot.description) }
        }
        for line in stalled { report("stalled: " + line) }
        if !stalled.isEmpty { reportStacks() }
        let pool = state.withLock(announcingTo: self) { state -> [String] in
          var lines: [String] = []
          let silent = now &- state.heartbeat
          if silent > 1_000_000_000 && silent < 1 << 62 {
            if !state.poolReportedBlocked {
              lines.append(
                "cooperative pool blocked: its 10 ms timer has not run for \(silent / 1_000_000) ms"
              )
            }
            state.poolReportedBlocked = true
          } else {
            state.poolReportedBlocked = false
          }
          if state.worstLateness > 100_000_000,
            state.worstLateness > state.reportedLateness + 100_000_000
          {
            state.reportedLateness = state.worstLateness
            lines.append(
              "cooperative pool late: a 10 ms timer woke up to "
                + "\(state.worstLateness / 1_000_000) ms late"
            )
          }
          return lines
        }
        for line in pool { report(line) }
        if pool.contains(where: { $0.contains("blocked") }) { reportStacks() }
      }
    }
  }
}

/// What a queue holds and does at one moment, for the stall watchdog.
struct QueueSnapshot: Sendable, CustomStringConvertible {
  let name: String
  let limit: Int
  /// Live jobs waiting in line.
  let waiting: Int
  /// Entries in line, cancelled ones (tombstones) included.
  let lineEntries: Int
  /// Detached jobs waiting in the inbox.
  let inbox: Int
  let inboxIsWatched: Bool
  /// Each running job: its number, and what it is doing.
  let running: [String]
  /// Jobs of a start-ordered queue that gave their slot back and still run.
  let released: Int
  /// Jobs ended (finished, failed or cancelled) so far.
  let ended: UInt64
  let idleWaiters: Int
  /// Runner tasks alive (detached jobs run on them).
  let runners: Int

  var isIdle: Bool { waiting == 0 && running.isEmpty && released == 0 && inbox == 0 }

  var description: String {
    "queue '\(name)' (limit \(limit)): \(waiting) waiting in line (\(lineEntries) entries), "
      + "\(inbox) in the inbox (\(inboxIsWatched ? "watched" : "closed")), running "
      + "[\(running.joined(separator: ", "))], \(released) released, \(ended) ended, "
      + "\(idleWaiters) idle waiters, \(runners) runner tasks alive"
  }
}
