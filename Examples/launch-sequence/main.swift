// The serial-modals article's launch steps, with terminal "modals" in place of view controllers. The app calls
// addLaunchSteps() at launch and again on every return to the foreground; the sequencer runs the
// steps one at a time, in order, without queuing a step twice.
import OrderlyLaunch

/// What the terminal "screen" shows.
@MainActor
func modal(_ text: String) { print("    [modal] \(text)") }

/// Waits a little, like a user reading a modal.
func userPause() async { try? await Task.sleep(for: .milliseconds(30)) }

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
    while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
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
let sequencer = LaunchSequencer()

/// The serial-modals article's function, called on launch and on every foreground.
@MainActor
func addLaunchSteps() {
  var steps: [any LaunchStep] = [
    AppUpgradeNudgeStep(), PasscodeStep(app: app), RemoveLaunchScreenStep(),
  ]
  if app.pendingDeepLink != nil { steps.append(DeepLinkStep(app: app)) }
  if app.appWasUpgraded { steps.append(WhatsNewStep()) }
  for step in steps {
    let queued = sequencer.enqueue(step)
    print("  enqueue \(step.name): \(queued ? "queued" : "already pending or running, not queued")")
  }
}

print("Launch:")
addLaunchSteps()
print("The app goes to the background and comes back while steps are pending:")
addLaunchSteps()
// The deep link is opened by another part of the app before its step's turn: skipped.
app.pendingDeepLink = nil
print("Running:")
await sequencer.waitUntilIdle()

print("")
print("Next foreground; the user logs out while the passcode prompt is up:")
addLaunchSteps()
while !app.passcodeOnScreen { await Task.yield() }
sequencer.cancelAll()
print("  cancelAll(): idle at once: \(sequencer.isIdle)")
// The cancelled step's task winds down by itself; wait for its prompt to go.
while app.passcodeOnScreen { await Task.yield() }

print("")
print("History, one step at a time, in order:")
for (index, record) in sequencer.history.enumerated() {
  let number = index + 1
  print("  start \(number) \(record.name)")
  switch record.outcome {
  case .completed: print("  finish \(number) \(record.name): completed")
  case .skipped: print("  dropped \(number) \(record.name): skipped (shouldRun() said no)")
  case .cancelled: print("  cancelled \(number) \(record.name): cancelled")
  case .timedOut: print("  error \(number) \(record.name): timed out")
  }
}
