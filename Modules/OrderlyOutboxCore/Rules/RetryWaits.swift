// The retry waits of one outbox, which pause, resume and stop end early.

import OrderlyCore

/// The retry waits of one outbox, which pause, resume and stop end early.
///
/// A line that waits to retry a message takes ``epoch`` before it checks whether it may go on
/// (not paused, not stopping), then waits with that epoch: a ``wakeAll()`` that came in between
/// ends the wait at once, one that comes during it ends it then. So `pause(); resume()` back to
/// back, however close, always ends the waits that were running, and the message is tried again
/// at once, as ``RetryPolicy`` promises.
package final class RetryWaits: Sendable {
  /// A wait's place, from before its sleeper starts until it returns.
  private enum Slot {
    /// Not registered yet.
    case starting
    /// Its time came (or its task was cancelled) before it was registered.
    case ended
    /// Registered: resumed by its sleeper, a cancellation or ``wakeAll()``.
    case waiting(CheckedContinuation<Void, Never>)
  }

  private struct State {
    var epoch: UInt64 = 0
    var lastToken: UInt64 = 0
    var slots: [UInt64: Slot] = [:]
  }

  private let state = OrderlyLock(State())

  /// An empty set of waits.
  package init() {}

  /// How many times ``wakeAll()`` ran: a wait given an older epoch ends at once.
  package var epoch: UInt64 { state.withLock(announcingTo: self) { $0.epoch } }

  /// Ends every wait in progress, and every wait that begins with an epoch taken before this
  /// call.
  package func wakeAll() {
    let woken = state.withLock(announcingTo: self) { state in
      state.epoch &+= 1
      var woken: [CheckedContinuation<Void, Never>] = []
      for (token, slot) in state.slots {
        guard case .waiting(let continuation) = slot else { continue }
        woken.append(continuation)
        state.slots[token] = nil
      }
      return woken
    }
    for waiter in woken { waiter.resume() }
  }

  /// Waits `delay` on `clock`, or until ``wakeAll()`` runs (or ran since `epoch`), or the task
  /// is cancelled, whichever comes first.
  ///
  /// - Parameters:
  ///   - delay: The retry delay.
  ///   - clock: The outbox's clock.
  ///   - epoch: ``epoch`` as it was before the caller checked that it may wait.
  package func wait(_ delay: Duration, on clock: any Clock<Duration>, since epoch: UInt64) async {
    let token = state.withLock(announcingTo: self) { state -> UInt64 in
      state.lastToken &+= 1
      state.slots[state.lastToken] = .starting
      return state.lastToken
    }
    let sleeper = Task { [weak self] in
      try? await clock.sleep(for: delay)
      if !Task.isCancelled { self?.end(token) }
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        // Checked under the lock `wakeAll` and `end` take: a wake or an end that came first is
        // seen here; one that comes later finds the waiter registered.
        let now = state.withLock(announcingTo: self) { state -> Bool in
          guard case .starting = state.slots[token], state.epoch == epoch, !Task.isCancelled
          else { return true }
          state.slots[token] = .waiting(continuation)
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      end(token)
    }
    state.withLock(announcingTo: self) { $0.slots[token] = nil }
    // Woken early: the clock's sleeper is not needed any more.
    sleeper.cancel()
  }

  /// Ends one wait: resumes it if it is registered, or marks it ended if it is not yet.
  private func end(_ token: UInt64) {
    let waiter = state.withLock(announcingTo: self) { state -> CheckedContinuation<Void, Never>? in
      switch state.slots[token] {
      case .starting:
        state.slots[token] = .ended
        return nil
      case .waiting(let continuation):
        state.slots[token] = nil
        return continuation
      case .ended, nil:
        return nil
      }
    }
    waiter?.resume()
  }
}
