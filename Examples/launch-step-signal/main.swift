// The serial-modals article's passcode step bridges a delegate into async code by hand, with a continuation and a
// cancellation handler. LaunchSignal does that part: the delegate fires it, the step awaits it,
// and cancellation while the prompt is up dismisses the prompt without leaking anything.
import Dispatch
import OrderlyLaunch

/// A stand-in for the passcode view controller: it calls its delegate when unlocked.
@MainActor
final class PasscodePrompt {
  var onUnlock: (@Sendable () -> Void)?

  func present(unlockAfter delay: Duration?) {
    print("    [modal] Enter passcode")
    guard let delay, let onUnlock else { return }
    // The "user" types the passcode on another thread, as a delegate callback would arrive.
    let milliseconds = Int(delay / .milliseconds(1))
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
      onUnlock()
      onUnlock()  // a second callback is harmless
    }
  }

  func dismiss() { print("    [modal] passcode prompt dismissed") }
}

struct PasscodeStep: LaunchStep {
  let unlockAfter: Duration?
  /// Fired once the prompt is on screen: for this demo's narration.
  let shown = LaunchSignal<Void>()

  func run() async {
    let prompt = PasscodePrompt()
    let unlocked = LaunchSignal<Void>()
    prompt.onUnlock = { unlocked.fire() }
    prompt.present(unlockAfter: unlockAfter)
    shown.fire()
    do {
      try await unlocked.wait()
      print("    unlocked")
    } catch {
      prompt.dismiss()  // cancelled while the prompt was up
    }
  }
}

let sequencer = LaunchSequencer()
print("1. The user unlocks:")
sequencer.enqueue(PasscodeStep(unlockAfter: .milliseconds(40)))
await sequencer.waitUntilIdle()
print("   \(sequencer.history.last.map(String.init(describing:)) ?? "no history")")

print("2. The app cancels the launch while the prompt is up:")
let waiting = PasscodeStep(unlockAfter: nil)
sequencer.enqueue(waiting)
try await waiting.shown.wait()
sequencer.cancelAll()
// The cancelled step is recorded once its run() has returned (the prompt dismissed).
await sequencer.waitUntilIdle()
print("   \(sequencer.history.last.map(String.init(describing:)) ?? "no history")")

print("3. The signal's edge cases:")
let early = LaunchSignal<String>()
early.fire("fired before anyone waited")
print("   wait() after fire: \(try await early.wait())")
print("   a second fire is ignored: fire returned \(early.fire("again"))")
let never = LaunchSignal<Void>()
let waiter = Task { try await never.wait() }
waiter.cancel()
let result = await waiter.result
print(
  "   a cancelled waiter: \((try? result.get()) == nil ? "threw CancellationError" : "returned")"
)
