// The task management article's model: a "Do thing" button that is enabled while nothing runs, a Cancel button shown
// while something does, and text that grows when the work completes. The model keeps no Task
// handles: a TaskStore does. Its state is printed every time it changes, through Observation,
// as a view would be redrawn.
import Foundation
import Observation
import OrderlyCore
import OrderlyTaskStore

@MainActor
@Observable
final class MyModel {
  enum TaskKey: Hashable, Sendable {
    case doThing
  }

  var someText = ""
  private let taskStore = TaskStore<TaskKey>()
  /// The "server": each request waits here until the script answers it.
  @ObservationIgnored let server = AsyncSemaphore(value: 0)

  var doThingButtonEnabled: Bool { !taskStore.isRunning(forKey: .doThing) }
  var showCancelButton: Bool { taskStore.isRunning(forKey: .doThing) }
  /// Taps waiting for their turn behind the running one.
  var tapsWaiting: Int { taskStore.queuedCount(forKey: .doThing) }

  func doThingButtonTapped() {
    taskStore.addTask(forKey: .doThing, policy: .dropNew) {
      try await self.server.waitUnlessCancelled()  // get something from the server
      self.doThingResponse()
    }
  }

  func cancelButtonTapped() {
    taskStore.cancelTask(forKey: .doThing)
  }

  private func doThingResponse() {
    guard !Task.isCancelled else { return }
    someText += "!"
  }
}

let model = MyModel()
/// The "screen": redraws asked for by Observation and not drawn yet, and the last frame drawn.
@MainActor
final class Screen {
  var pendingRedraws = 0
  var lastFrame = ""
}
let screen = Screen()

/// Prints the "view", and again whenever something it reads changes.
///
/// A redraw that would print the frame already on screen prints nothing, as a view that did not
/// change shows nothing new.
@MainActor
func render(_ label: String) {
  withObservationTracking {
    let button = model.doThingButtonEnabled ? "[Do thing]" : "[Do thing] (disabled)"
    let cancel = model.showCancelButton ? "  [Cancel]" : ""
    let frame = "\(button)\(cancel)  text: \"\(model.someText)\""
    if frame != screen.lastFrame {
      print("  \(label.padding(toLength: 26, withPad: " ", startingAt: 0)) \(frame)")
      screen.lastFrame = frame
    }
  } onChange: {
    MainActor.assumeIsolated { screen.pendingRedraws += 1 }
    Task { @MainActor in
      render("changed")
      screen.pendingRedraws -= 1
    }
  }
}

/// Waits until the model shows `condition` and every redraw it caused has been drawn.
@MainActor
func settle(until condition: () -> Bool = { true }) async {
  // A few turns of the main actor first, so that a change just made has asked for its redraw.
  for _ in 0..<3 { await Task.yield() }
  while !condition() || screen.pendingRedraws > 0 { await Task.yield() }
}

render("first draw")
print("Tap Do thing:")
model.doThingButtonTapped()
await settle { !model.doThingButtonEnabled }
print("The server answers:")
model.server.signal()
await settle { model.someText == "!" && model.doThingButtonEnabled }
print("Tap Do thing, then tap it again while it runs (the button is disabled; .dropNew agrees):")
model.doThingButtonTapped()
model.doThingButtonTapped()
await settle { !model.doThingButtonEnabled }
print("  taps waiting behind the running one: \(model.tapsWaiting)")
print("Tap Cancel:")
model.cancelButtonTapped()
await settle { model.doThingButtonEnabled }
print("  taps waiting: \(model.tapsWaiting)")
print("The late answer changes nothing:")
model.server.signal()
await settle()
print("Final text: \"\(model.someText)\"")
