// Built with the Postgres trait only; see Package.swift. Needs no server.
#if Postgres
import Foundation
@testable import OrderlyPostgres
import OrderlyTestSupport
import Testing

/// The deadline every worker query runs under: one shared watch, no timer per query.
@Suite(
  "withDeadline: a query's result, its deadline, its connection's end",
  .timeLimit(.minutes(2))
)
struct QueryDeadlineTests {
  /// An operation that never returns and ignores cancellation, as a query PostgresNIO wrote to
  /// a closed connection does.
  private static func forever() async {
    await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
  }

  @Test("the operation's value and its error reach the caller")
  func valueAndError() async throws {
    let value = try await withDeadline(.seconds(30)) { 42 }
    #expect(value == 42)
    struct Refused: Error {}
    let failed: Result<Int, any Error>
    do {
      failed = .success(try await withDeadline(.seconds(30)) { () -> Int in throw Refused() })
    } catch {
      failed = .failure(error)
    }
    let refused = (try? failed.get()) == nil && failed.errorIs(Refused.self)
    #expect(refused)
  }

  @Test("an operation that never ends, ignoring cancellation: QueryTimedOut once the limit passes")
  func deadlinePasses() async throws {
    let started = ContinuousClock.now
    let outcome: Result<Void, any Error>
    do {
      outcome = .success(try await withDeadline(.milliseconds(300)) { await Self.forever() })
    } catch {
      outcome = .failure(error)
    }
    let timedOut = outcome.errorIs(QueryTimedOut.self)
    #expect(timedOut)
    let waited = ContinuousClock.now - started
    #expect(waited >= .milliseconds(300))
  }

  @Test(
    "an operation whose connection has closed and that never ends: ConnectionLost long before the limit"
  )
  func connectionEnds() async throws {
    let outcome: Result<Void, any Error>
    do {
      outcome = .success(
        try await withDeadline(.seconds(100)) {
          // As checkedQuery does, after its check and before a write that is lost.
          QueryConnection.current?.watch { true }
          await Self.forever()
        }
      )
    } catch {
      outcome = .failure(error)
    }
    // The suite's time limit (2 minutes) is below the deadline: only the connection's end can
    // have ended the wait.
    let ended = outcome.errorIs(ConnectionLost.self)
    #expect(ended)
  }

  @Test("a connection that stays open does not end an operation that takes a while")
  func openConnection() async throws {
    let gate = Gate()
    let value = await withTaskGroup(of: Int?.self) { group in
      group.addTask {
        try? await withDeadline(.seconds(100)) { () -> Int in
          QueryConnection.current?.watch { false }
          try await gate.wait()
          return 7
        }
      }
      // Long enough for the watch to look several times.
      group.addTask {
        try? await Task.sleep(for: .seconds(1))
        gate.open()
        return nil
      }
      var value: Int?
      for await result in group { if let result { value = result } }
      return value
    }
    #expect(value == 7)
  }

  @Test("cancelling the caller cancels the operation")
  func callerCancelled() async throws {
    let started = Gate()
    let call = Task {
      try await withDeadline(.seconds(100)) {
        started.open()
        try await Task.sleep(for: .seconds(100))
      }
    }
    try await started.wait()
    call.cancel()
    let outcome = await call.result
    let cancelled = outcome.errorIs(CancellationError.self)
    #expect(cancelled)
  }

  @Test("many calls at once, some cancelled, some timing out: each caller gets exactly one outcome")
  func manyAtOnce() async throws {
    let count = 2_000
    let outcomes = try await withThrowingTaskGroup(of: Int.self) { group in
      for index in 0..<count {
        group.addTask {
          let call = Task { () -> Int in
            try await withDeadline(index % 7 == 0 ? .milliseconds(1) : .seconds(100)) {
              () -> Int in
              if index % 7 == 0 { await Self.forever() }
              await Task.yield()
              return index
            }
          }
          if index % 5 == 0 { call.cancel() }
          switch await call.result {
          case .success(let value):
            #expect(value == index)
            return 1
          case .failure: return 1
          }
        }
      }
      var total = 0
      for try await one in group { total += one }
      return total
    }
    #expect(outcomes == count)
  }
}

extension Result {
  /// Whether this is a failure with an error of type `type`.
  fileprivate func errorIs<E: Error>(_ type: E.Type) -> Bool {
    if case .failure(let error) = self { return error is E }
    return false
  }
}
#endif
