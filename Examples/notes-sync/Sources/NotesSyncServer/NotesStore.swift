public import Foundation
public import OrderlyRepository

/// The server's notes, and the mutations it applied, each once.
///
/// A mutation arrives with an idempotency key (the outbox message's identifier). The first
/// arrival is applied and its outcome kept; a later arrival with the same key gets the same
/// outcome without being applied again. That is what makes the client's at-least-once
/// delivery apply every change exactly once.
public actor NotesStore {
  /// What became of a mutation.
  public enum Outcome: Sendable, Equatable {
    /// Applied now.
    case applied
    /// Applied before, under the same key: nothing changed now.
    case duplicate
    /// Cannot be applied (a note created twice, or an update of a missing note, or a key that
    /// came before with a different mutation); the client must not send it again.
    case conflict(String)
  }

  /// The notes, by identifier.
  public private(set) var notes: [Note.ID: NoteText] = [:]
  /// Each mutation applied, in the order applied.
  public private(set) var log: [NoteMutation] = []
  /// How many requests arrived, duplicates included.
  public private(set) var received = 0
  /// How many arrivals were duplicates.
  public private(set) var duplicates = 0
  /// Each key's outcome, and the mutation it came with.
  private var outcomes: [UUID: (outcome: Outcome, mutation: NoteMutation)] = [:]
  /// Runs after a mutation is applied, before the answer is sent: tests hold the answer here.
  private var afterApplying: (@Sendable (NoteMutation) async -> Void)?

  /// An empty store.
  public init() {}

  /// Applies a mutation once per key.
  ///
  /// - Parameters:
  ///   - mutation: The change.
  ///   - key: Its idempotency key.
  /// - Returns: What became of it.
  public func apply(_ mutation: NoteMutation, key: UUID) async -> Outcome {
    received += 1
    if let earlier = outcomes[key] {
      // A key stands for one mutation: the same key with another body is a client's mistake
      // (a reused key, or a message changed after it was sent), never a duplicate to ignore.
      guard earlier.mutation == mutation else {
        return .conflict(
          "the Idempotency-Key \(key) came before with another mutation "
            + "(\(earlier.mutation)); this one (\(mutation)) was not applied"
        )
      }
      duplicates += 1
      return earlier.outcome == .applied ? .duplicate : earlier.outcome
    }
    let outcome: Outcome
    if mutation.apply(to: &notes) {
      log.append(mutation)
      outcome = .applied
    } else {
      outcome = .conflict("cannot \(mutation): the server's notes do not allow it")
    }
    outcomes[key] = (outcome, mutation)
    if outcome == .applied, let afterApplying { await afterApplying(mutation) }
    return outcome
  }

  /// Sets what runs after each mutation is applied, before its answer is sent.
  ///
  /// - Parameter hook: The code to run; `nil` for none.
  public func setAfterApplying(_ hook: (@Sendable (NoteMutation) async -> Void)?) {
    afterApplying = hook
  }
}
