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

/// Prints the "view", and again whenever something it reads changes.
@MainActor
func render(_ label: String) {
  withObservationTracking {
    let button = model.doThingButtonEnabled ? "[Do thing]" : "[Do thing] (disabled)"
    let cancel = model.showCancelButton ? "  [Cancel]" : ""
    print(
      "  \(label.padding(toLength: 26, withPad: " ", startingAt: 0)) \(button)\(cancel)  text: \"\(model.someText)\""
    )
  } onChange: {
    Task { @MainActor in render("changed") }
  }
}

/// Lets queued main-actor work (tasks, redraws) run.
@MainActor
func settle() async {
  for _ in 0..<10 { await Task.yield() }
}

render("first draw")
print("Tap Do thing:")
model.doThingButtonTapped()
await settle()
print("The server answers:")
model.server.signal()
await settle()
print("Tap Do thing, then tap it again while it runs (the button is disabled; .dropNew agrees):")
model.doThingButtonTapped()
model.doThingButtonTapped()
await settle()
print("Tap Cancel:")
model.cancelButtonTapped()
await settle()
print("The late answer changes nothing:")
model.server.signal()
await settle()
print("Final text: \"\(model.someText)\"")
