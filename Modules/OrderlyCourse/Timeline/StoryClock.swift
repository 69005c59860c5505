import Foundation
public import OrderlyCore
public import OrderlyTestSupport
import Synchronization

/// The clock of an example told on a timeline: jobs take their time on it, a story moves it on,
/// and every run prints the same times however busy the machine is.
///
/// It is a ``ManualClock`` that knows the deadline of everyone asleep on it. The story waits
/// until as many jobs sleep as should (``advance(whenSleeping:)``) and moves time to the
/// earliest deadline: the job that would end first ends, and what it lets start starts at that
/// instant. Jobs take their time with ``work(for:)`` and write what they do with
/// ``record(_:_:_:at:)``; ``lines`` prints the events in the order of their times, with the
/// time, as `TimelinePicture` draws them on the clock:
///
/// ```swift
/// let story = StoryClock()
/// queue.enqueue {
///   story.record(.start, 1, "download")
///   let done = try await story.work(for: .milliseconds(30))
///   story.record(.finish, 1, "download: 3K", at: done)
/// }
/// try await story.advance(whenSleeping: 1)
/// ```
///
/// A job's end is written at the instant its work ended, which the story may have moved past
/// by the time the job's task runs again; a job's start is written when it starts, which is
/// at the instant something ended (the story cannot move on before the new job sleeps).
///
/// Give jobs durations that end at different instants: two deadlines at one instant wake
/// together, and a story counting sleepers one ending at a time would wait for good.
public final class StoryClock: Clock, Sendable {
  /// What an event is to a job.
  ///
  /// Among the events of one instant, ends come first, then starts, then jobs put in line:
  /// what ends lets the next start.
  public enum Event: Int, Sendable {
    /// The job ended.
    case finish = 0
    /// The job was taken out of line before it ran (a newer one replaced it, say).
    case dropped = 1
    /// The job started.
    case start = 2
    /// The job was put in line, to start later.
    case waiting = 3

    /// The line's first word: `finish`, `dropped`, `start`, `waiting`.
    var word: String {
      switch self {
      case .finish: "finish"
      case .dropped: "dropped"
      case .start: "start"
      case .waiting: "waiting"
      }
    }
  }

  /// A point of the story's time.
  public typealias Instant = ManualClock.Instant

  private let manual = ManualClock()
  private struct State {
    var deadlines: [UUID: Duration] = [:]
    var events: [(at: Duration, event: Event, job: Int, order: Int, text: String)] = []
  }
  private let state = Mutex(State())

  /// Creates a clock at 0 ms.
  public init() {}

  /// The current instant.
  public var now: Instant { manual.now }

  /// Zero, as a manual clock's.
  public var minimumResolution: Duration { .zero }

  /// Sleeps until the story moves the clock to `deadline`, or past it.
  ///
  /// - Parameters:
  ///   - deadline: The instant to wake at.
  ///   - tolerance: Ignored.
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let token = UUID()
    state.withLock(announcingTo: self) { $0.deadlines[token] = deadline.offset }
    defer { state.withLock(announcingTo: self) { _ = $0.deadlines.removeValue(forKey: token) } }
    try await manual.sleep(until: deadline)
  }

  /// Takes `duration` of the story's time: sleeps until the story moves the clock that far.
  ///
  /// - Parameter duration: How long the work takes.
  /// - Returns: The instant it ended.
  /// - Throws: `CancellationError` if the task is cancelled first.
  @discardableResult
  public func work(for duration: Duration) async throws -> Instant {
    let end = manual.now.advanced(by: duration)
    try await sleep(until: end)
    return end
  }

  /// Writes a job's event.
  ///
  /// - Parameters:
  ///   - event: What happened to the job.
  ///   - job: The job's number.
  ///   - text: What follows `start 3 ` or `finish 3 `, as in `download: 3K`.
  ///   - instant: When it happened: the current time if `nil`; for an end, the instant
  ///     ``work(for:)`` returned.
  public func record(_ event: Event, _ job: Int, _ text: String, at instant: Instant? = nil) {
    let at = (instant ?? manual.now).offset
    state.withLock(announcingTo: self) {
      $0.events.append((at, event, job, $0.events.count, text))
    }
  }

  /// Waits until `count` jobs sleep on the clock, then moves it to the earliest of their
  /// deadlines.
  ///
  /// - Parameter count: How many jobs should be asleep now: the ones the story has going.
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func advance(whenSleeping count: Int) async throws {
    try await manual.waitForSleepers(count)
    let next = state.withLock(announcingTo: self) { state -> Duration? in
      guard let next = state.deadlines.values.min() else { return nil }
      // The ones woken now are no longer waited for, whenever their tasks get to run.
      state.deadlines = state.deadlines.filter { $0.value > next }
      return next
    }
    if let next { manual.advance(to: Instant(offset: next)) }
  }

  /// Moves the story on for as long as `queue` has work: each time every job it runs sleeps on
  /// this clock, to the earliest deadline.
  ///
  /// For a story whose jobs all take their time on this clock, where counting sleepers by hand
  /// (``advance(whenSleeping:)``) would tie the story to one order of ends: it gives the same
  /// times whatever the machine's load, and whichever order the queue's rules make. Enqueue
  /// every job first; nothing else may enqueue on `queue` meanwhile.
  ///
  /// - Parameter queue: The queue whose jobs sleep on this clock.
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func advance(untilIdle queue: some OrderlyQueue) async throws {
    while true {
      try Task.checkCancellation()
      // With nothing enqueued meanwhile, running + pending only falls (a job ends) and pending
      // only falls (a job starts): the same pair before and after the count of sleepers means
      // the queue did not change in between, so that count is of a still picture.
      let before = (queue.runningCount, queue.pendingCount)
      if before == (0, 0) { return }
      let asleep = state.withLock(announcingTo: self) { $0.deadlines.count }
      let after = (queue.runningCount, queue.pendingCount)
      guard before == after, asleep == before.0, asleep > 0 else {
        await Task.yield()
        continue
      }
      let next = state.withLock(announcingTo: self) { state -> Duration? in
        guard let next = state.deadlines.values.min() else { return nil }
        state.deadlines = state.deadlines.filter { $0.value > next }
        return next
      }
      if let next { manual.advance(to: Instant(offset: next)) }
    }
  }

  /// The events, as `[ 30 ms] finish 1 download: 3K`, in the order of their times; at one
  /// instant, in the order ``Event`` gives, each by job number.
  public var lines: [String] {
    let events = state.withLock(announcingTo: self) { $0.events }.sorted {
      ($0.at, $0.event.rawValue, $0.job, $0.order) < ($1.at, $1.event.rawValue, $1.job, $1.order)
    }
    let width = events.map { "\(Self.milliseconds($0.at))".count }.max() ?? 1
    return events.map { event in
      let time = "\(Self.milliseconds(event.at))"
      let padded = String(repeating: " ", count: width - time.count) + time
      return "[\(padded) ms] \(event.event.word) \(event.job) \(event.text)"
    }
  }

  /// `[ 50 ms]`: an instant as the story's lines print it, its number right-aligned in `width`
  /// digits.
  ///
  /// - Parameters:
  ///   - instant: The instant.
  ///   - width: The digits to align to.
  /// - Returns: The time in brackets.
  public static func stamp(_ instant: Instant, width: Int = 3) -> String {
    let time = "\(milliseconds(instant.offset))"
    return "[\(String(repeating: " ", count: max(0, width - time.count)))\(time) ms]"
  }

  private static func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    return Int(seconds * 1_000 + attoseconds / 1_000_000_000_000_000)
  }
}
