// The same burst of three "Save" taps, 10 ms apart, each starting 30 ms of work, under every
// TaskStore policy. A cancelled save takes 10 ms more to roll back. Time is a manual clock
// stepped 5 ms at a time, so every run prints the same timelines: which taps ran, waited, were
// cancelled, dropped or joined.
import OrderlyTaskStore
import OrderlyTestSupport

let step = Duration.milliseconds(5)
let tapSteps = [0, 2, 4]
let steps = 24

/// The current step, read by the saves to record when things happen.
@MainActor
final class Timeline {
  var now = 0
}

/// The store's events, as the listener heard them, and when each dropped task was dropped.
@MainActor
final class Heard {
  var events: [TaskStoreEvent<String>] = []
  var droppedAt: [UInt64: Int] = [:]
}

/// What happened to one tap.
@MainActor
final class Tap {
  let number: Int
  let tappedAt: Int
  var startedAt: Int?
  var cancelledAt: Int?
  var endedAt: Int?
  /// When the store dropped it, from its `ended ...: dropped` event: at once (`.dropNew`), or
  /// later, when a newer tap took its place in line (`.keepLatest`).
  var droppedAt: Int?

  init(number: Int, tappedAt: Int) {
    self.number = number
    self.tappedAt = tappedAt
  }

  /// `·` waiting, `█` saving, `░` rolling back after cancellation, then `✓` or `✗`; a dropped
  /// tap's `-` where the store dropped it, after the time it waited in line.
  func row(joined: Bool, dropped: Bool) -> String {
    (0..<steps).map { index -> String in
      if index < tappedAt { return " " }
      if dropped {
        let at = droppedAt ?? tappedAt
        return index < at ? "·" : index == at ? "-" : " "
      }
      if joined { return index == tappedAt ? "↑" : " " }
      let start = startedAt ?? Int.max
      let end = endedAt ?? Int.max
      if index < start { return index < end ? "·" : (index == end ? "✗" : " ") }
      if index < end { return (cancelledAt.map { index >= $0 } ?? false) ? "░" : "█" }
      if index == end { return cancelledAt == nil ? "✓" : "✗" }
      return " "
    }.joined()
  }
}

// course: a tap
/// One tap on Save, under the policy being shown.
///
/// A task under the key "save": it saves for 30 ms; cancelled, it rolls back for 10 ms more,
/// and ends as cancelled.
@MainActor
func save(
  _ tap: Tap,
  in store: TaskStore<String>,
  policy: TaskStorePolicy,
  clock: ManualClock,
  timeline: Timeline
) -> TaskStoreTask<Int> {
  store.addTask(forKey: "save", policy: policy) {
    tap.startedAt = timeline.now
    do {
      try await clock.sleep(for: .milliseconds(30))
    } catch {
      tap.cancelledAt = timeline.now
      // Rolling back cannot be cancelled: a fresh task, not this cancelled one, waits.
      await Task { try? await clock.sleep(for: .milliseconds(10)) }.value
      tap.endedAt = timeline.now
      throw error
    }
    tap.endedAt = timeline.now
    return tap.number
  }
}

let policies: [TaskStorePolicy] = [
  .cancelPrevious, .cancelPreviousAndWait, .enqueue, .concurrent(limit: 2), .dropNew,
  .keepLatest, .joinExisting,
]
// course end: a tap

print("Three taps on Save at 0, 10 and 20 ms; a save takes 30 ms, a rollback 10 ms.")
print("One column = 5 ms.  · waiting  █ saving  ░ rolling back  ✓ saved  ✗ cancelled")
print("                    - dropped  ↑ joined the running save")
for policy in policies {
  let clock = ManualClock()
  let timeline = Timeline()
  let store = TaskStore<String>()
  let events = store.events()
  var taps: [Tap] = []
  // The store's events as they happen, with the step each was heard at: a dropped tap's row
  // shows how long it waited in line before the store dropped it.
  let heard = Heard()
  let listener = Task { @MainActor in
    for await event in events {
      heard.events.append(event)
      if case .ended(_, let task, .dropped) = event { heard.droppedAt[task] = timeline.now }
    }
  }
  var handles: [TaskStoreTask<Int>] = []
  for current in 0..<steps {
    timeline.now = current
    if let index = tapSteps.firstIndex(of: current) {
      let tap = Tap(number: index + 1, tappedAt: current)
      taps.append(tap)
      handles.append(save(tap, in: store, policy: policy, clock: clock, timeline: timeline))
    }
    // Let the tasks react before time moves on, and after: what the advance wakes happens at
    // the next step's time.
    for _ in 0..<200 { await Task.yield() }
    clock.advance(by: step)
    timeline.now = current + 1
    for _ in 0..<200 { await Task.yield() }
  }
  // Anything still rolling back gets the time it needs (it never does within the window).
  var extra = 0
  while extra < 100, store.isRunning(forKey: "save") || store.queuedCount(forKey: "save") > 0 {
    clock.advance(by: step)
    timeline.now += 1
    for _ in 0..<200 { await Task.yield() }
    extra += 1
  }
  listener.cancel()
  for tap in taps { tap.droppedAt = heard.droppedAt[UInt64(tap.number)] }
  print("")
  print(".\(policy)")
  for (tap, handle) in zip(taps, handles) {
    var joined = false
    var dropped = false
    let summary: String
    switch await handle.outcome {
    case .succeeded(let value) where value != tap.number:
      joined = true
      summary = "joined tap \(value): got its result"
    case .succeeded: summary = "saved"
    case .failed(let error): summary = "failed: \(error)"
    case .cancelled:
      summary = tap.startedAt == nil ? "cancelled before it started" : "cancelled"
    case .dropped:
      dropped = true
      summary =
        (tap.droppedAt ?? tap.tappedAt) > tap.tappedAt
        ? "dropped: a newer tap took its place in line" : "dropped"
    }
    print("  tap \(tap.number) │\(tap.row(joined: joined, dropped: dropped))│ \(summary)")
  }
  if case .cancelPrevious = policy {
    // The store's own account of the same run: three starts, three ends. The store numbers its
    // tasks in the order they were added, so task #N is tap N, whose record says when.
    print("  the store's events, and when each cancelled save began to roll back:")
    func tap(numbered task: UInt64) -> Tap? {
      taps.first { UInt64($0.number) == task }
    }
    // With the moment each cancelled save began to roll back, from its tap's record.
    var lines: [(step: Int, text: String)] = []
    for event in heard.events.prefix(6) {
      let step: Int?
      switch event {
      case .started(_, let task): step = tap(numbered: task)?.startedAt
      case .ended(_, let task, _): step = tap(numbered: task)?.endedAt
      default: step = nil
      }
      lines.append((step ?? Int.max, "\(event)"))
    }
    for tap in taps {
      if let cancelled = tap.cancelledAt {
        let text = "rolling back save #\(tap.number): cancelled by tap \(tap.number + 1)"
        lines.append((cancelled, text))
      }
    }
    for line in lines.enumerated().sorted(by: {
      ($0.element.step, $0.offset) < ($1.element.step, $1.offset)
    }).map(\.element) {
      let milliseconds = line.step == Int.max ? "?" : "\(line.step * 5)"
      let padding = String(repeating: " ", count: max(0, 3 - milliseconds.count))
      print("    [\(padding)\(milliseconds) ms] \(line.text)")
    }
    print("  (each tap cancels the save before it; only the last tap's save completes)")
  }
}
