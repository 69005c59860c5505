// The serial-modals article's launch steps, with terminal "modals" in place of view controllers. The app calls
// addLaunchSteps() at launch and again on every return to the foreground; the sequencer runs the
// steps one at a time, in order, without queuing a step twice. Time is a manual clock that only
// the user's actions below move on, so every run takes the same time: the history's times
// and the timeout of "what's new" are exact.
import OrderlyLaunch
import OrderlyTestSupport

let clock = ManualClock()

/// What the terminal "screen" shows.
@MainActor
func modal(_ text: String) { print("    [modal] \(text)") }

/// Waits while the user reads a modal: until the clock is moved on (by 30 ms, below).
func userPause() async { try? await clock.sleep(for: .milliseconds(30)) }

struct AppUpgradeNudgeStep: LaunchStep {
  func run() async {
    modal("A new version is available. [Later]")
    await userPause()
    modal("user tapped Later")
  }
}

struct PasscodeStep: LaunchStep {
  let app: AppState
  func run() async {
    modal("Enter passcode")
    app.passcodeOnScreen = true
    defer { app.passcodeOnScreen = false }
    await userPause()
    modal(Task.isCancelled ? "passcode prompt dismissed (cancelled)" : "unlocked")
  }
}

struct RemoveLaunchScreenStep: LaunchStep {
  func run() async { modal("launch screen removed") }
}

/// Runs only if a deep link is still waiting when its turn comes.
struct DeepLinkStep: LaunchStep {
  let app: AppState
  func shouldRun() async -> Bool { app.pendingDeepLink != nil }
  func run() async {
    modal("opening \(app.pendingDeepLink ?? "")")
    app.pendingDeepLink = nil
  }
}

/// "What's new" waits for a tap that never comes; its timeout moves the launch on.
struct WhatsNewStep: LaunchStep {
  var timeout: Duration? { .milliseconds(120) }
  func run() async {
    modal("What's new in 2.0 [Continue]")
    // The tap that never comes: only the timeout's cancellation ends this wait.
    try? await clock.sleep(for: .seconds(3600))
    modal("what's new dismissed (cancelled)")
  }
}

@MainActor
final class AppState {
  var pendingDeepLink: String? = "notes://note/42"
  let appWasUpgraded = true
  var passcodeOnScreen = false
}

let app = AppState()
let sequencer = LaunchSequencer(clock: clock)

/// The serial-modals article's function, called on launch and on every foreground; returns the
/// steps it queued.
@MainActor
@discardableResult
func addLaunchSteps() -> [any LaunchStep] {
  var steps: [any LaunchStep] = [
    AppUpgradeNudgeStep(), PasscodeStep(app: app), RemoveLaunchScreenStep(),
  ]
  if app.pendingDeepLink != nil { steps.append(DeepLinkStep(app: app)) }
  if app.appWasUpgraded { steps.append(WhatsNewStep()) }
  var queued: [any LaunchStep] = []
  for step in steps {
    let added = sequencer.enqueue(step)
    print("  enqueue \(step.name): \(added ? "queued" : "already pending or running, not queued")")
    if added { queued.append(step) }
  }
  return queued
}

/// The user, on one launch.
///
/// Reads the upgrade nudge and the passcode prompt for 30 ms each, and never taps "what's
/// new", whose timeout moves the launch on. The clock moves only once
/// the step on screen waits on it (with the sequencer's timeout, for a step that has one).
@MainActor
func userActs(on steps: [any LaunchStep]) async throws {
  for step in steps {
    if let timeout = step.timeout {
      try await clock.waitForSleepers(2)
      clock.advance(by: timeout)
    } else if step is AppUpgradeNudgeStep || step is PasscodeStep {
      try await clock.waitForSleepers(1)
      clock.advance(by: .milliseconds(30))
    }
  }
}

print("Launch:")
let queued = addLaunchSteps()
print("The app goes to the background and comes back while steps are pending:")
addLaunchSteps()
// The deep link is opened by another part of the app before its step's turn: skipped.
app.pendingDeepLink = nil
print("Running:")
try await userActs(on: queued)
await sequencer.waitUntilIdle()

print("")
print("Next foreground; the user logs out while the passcode prompt is up:")
let again = addLaunchSteps()
try await userActs(on: Array(again.prefix(1)))  // the upgrade nudge, read as before
try await clock.waitForSleepers(1)  // the passcode prompt is up
clock.advance(by: .milliseconds(10))
sequencer.cancelAll()
// One modal at a time: the cancelled prompt is still on screen until its run() returns, so the
// sequencer is not idle yet, and a step enqueued now would wait for it.
print("  cancelAll(): idle while the prompt is still up: \(sequencer.isIdle)")
await sequencer.waitUntilIdle()
print("  once its run() returned: idle \(sequencer.isIdle), prompt up \(app.passcodeOnScreen)")

print("")
print("History, one step at a time, in order, with the clock's time:")
/// `[ 30 ms]`: a time on the clock, as the history prints it.
func stamp(_ time: Duration) -> String {
  let milliseconds = "\(Int(time / .milliseconds(1)))"
  return "[\(String(repeating: " ", count: max(0, 3 - milliseconds.count)))\(milliseconds) ms]"
}
// The clock moves only while a step runs, so each step starts when the one before it ended.
// Each launch adds its steps at once: every step but the first waits in line from then.
var start = Duration.zero
let firstOfLaunch: Set<Int> = [0, queued.count]
var waitingSince = Duration.zero
var history: [(at: Duration, line: String)] = []
for (index, record) in sequencer.history.enumerated() {
  let number = index + 1
  let end = start + record.duration
  if firstOfLaunch.contains(index) { waitingSince = start }
  history.append((start, "start \(number) \(record.name)"))
  if !firstOfLaunch.contains(index) {
    history.append((waitingSince, "waiting \(number) \(record.name)"))
  }
  switch record.outcome {
  case .completed: history.append((end, "finish \(number) \(record.name): completed"))
  case .skipped:
    history.append((end, "dropped \(number) \(record.name): skipped (shouldRun() said no)"))
  case .cancelled: history.append((end, "cancelled \(number) \(record.name): cancelled"))
  case .timedOut: history.append((end, "error \(number) \(record.name): timed out"))
  }
  start = end
}
// In the order of their times; at one time, in the order they happened.
for entry in history.enumerated().sorted(by: {
  ($0.element.at, $0.offset) < ($1.element.at, $1.offset)
}) {
  print("  \(stamp(entry.element.at)) \(entry.element.line)")
}
