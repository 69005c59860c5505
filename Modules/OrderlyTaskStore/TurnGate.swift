internal import OrderlyCore

/// Where a waiting task of a ``TaskStore`` waits for its turn.
///
/// A task that has to wait under its policy gets its `Task` when it is added, in its caller's
/// context, so it keeps its caller's task-local values and priority (as `Task {}` does), whoever
/// ends the task ahead of it. That `Task` waits here until the store admits it (``open()``) or it
/// is cancelled, whichever comes first; it is never left suspended.
final class TurnGate: Sendable {
  private struct State {
    var opened = false
    var cancelled = false
    var continuation: UnsafeContinuation<Void, Never>?
  }

  private let state = OrderlyLock(State())

  /// Whether the store admitted the task.
  ///
  /// Set and read on the store's actor: a task that finds it unset after its wait ended was
  /// cancelled first, and must not run.
  var isOpened: Bool { state.withLock(announcingTo: self) { $0.opened } }

  /// Admits the task: its wait ends.
  func open() {
    let continuation = state.withLock(announcingTo: self) { state in
      state.opened = true
      return state.continuation.take()
    }
    continuation?.resume()
  }

  /// Returns when the store admits the task or the task is cancelled.
  func wait() async {
    await withTaskCancellationHandler {
      // resumed by: open() (the store's turn), or the cancellation handler below.
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
        let now = state.withLock(announcingTo: self) { state -> Bool in
          if state.opened || state.cancelled { return true }
          state.continuation = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let continuation = state.withLock(announcingTo: self) { state in
        state.cancelled = true
        return state.continuation.take()
      }
      continuation?.resume()
    }
  }
}
