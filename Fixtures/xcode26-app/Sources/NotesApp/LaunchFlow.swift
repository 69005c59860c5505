import Observation
import OrderlyLaunch

/// The passcode prompt, as a screen with a callback: the launch step waits for it.
@Observable
final class PasscodePrompt {
  private(set) var isPresented = false
  var onUnlock: (() -> Void)?

  init() {}

  func present() { isPresented = true }
  func dismiss() { isPresented = false }

  /// What the user does: the prompt calls its callback.
  func unlock() { onUnlock?() }
}

/// A step that presents the prompt and waits for the user, its callback bridged with a
/// `LaunchSignal`.
struct PasscodeStep: LaunchStep {
  let prompt: PasscodePrompt
  let onScreen: (String) -> Void

  init(prompt: PasscodePrompt, onScreen: @escaping (String) -> Void) {
    self.prompt = prompt
    self.onScreen = onScreen
  }

  func run() async {
    let unlocked = LaunchSignal<Void>()
    prompt.onUnlock = { unlocked.fire() }
    prompt.present()
    onScreen("passcode up")
    try? await unlocked.wait()
    prompt.dismiss()
    onScreen("passcode down")
  }
}

/// A step that shows "what's new" until its signal fires.
struct WhatsNewStep: LaunchStep {
  let done: LaunchSignal<Void>
  let onScreen: (String) -> Void

  init(done: LaunchSignal<Void>, onScreen: @escaping (String) -> Void) {
    self.done = done
    self.onScreen = onScreen
  }

  func run() async {
    onScreen("what's new up")
    try? await done.wait()
    onScreen("what's new down")
  }
}

/// The app's launch: a sequencer and what has been on screen, in order.
@Observable
final class LaunchFlow {
  let sequencer = LaunchSequencer()
  private(set) var screen: [String] = []

  init() {}

  func show(_ line: String) { screen.append(line) }
}
