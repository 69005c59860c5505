import Foundation
import OrderlyRepository
import OrderlyTestSupport
import Testing

/// Seed 000's seven calls, in order.
private let sevenCalls: [NotesOperation] = [
  .fetchNotes, .fetchNote, .createNote, .fetchNotes, .updateNote, .fetchNotes, .deleteNote,
]

/// Makes one of the seven calls on the repository, ignoring its result.
private func make(_ operation: NotesOperation, on repository: NotesRepository) async {
  switch operation {
  case .fetchNotes: _ = try? await repository.notes()
  case .fetchNote: _ = try? await repository.note(id: 1)
  case .createNote: _ = try? await repository.create(title: "new", body: "")
  case .updateNote: _ = try? await repository.update(id: 1, title: "changed")
  case .deleteNote: _ = try? await repository.delete(id: 2)
  }
}

private let start = Date(timeIntervalSince1970: 1_800_000_000)
private let seedNotes = [
  Note(id: 1, title: "first", body: "a", createdAt: start),
  Note(id: 2, title: "second", body: "b", createdAt: start),
]

/// Advances `clock` whenever a call sleeps on it, until `task` ends.
func drive(_ clock: ManualClock, until task: Task<Void, Never>) async throws {
  let done = Gate()
  let watcher = Task {
    await task.value
    done.open()
  }
  while !done.isOpen {
    if clock.sleeperCount > 0 { clock.advance(by: .seconds(1)) }
    await Task.yield()
  }
  await watcher.value
}

@Suite("NotesRepository")
struct NotesRepositoryTests {
  @Test("seven concurrent calls start and finish in call order, for 50 latency seeds")
  func orderUnderConcurrentCallers() async throws {
    for seed in UInt64(0)..<50 {
      let clock = ManualClock()
      let service = InMemoryNotesService(
        notes: seedNotes,
        latency: .random(.milliseconds(10) ... .milliseconds(900)),
        failures: [.probability(0.2)],
        seed: seed,
        clock: clock
      )
      let repository = NotesRepository(service: service)
      let calls = Task {
        await withTaskGroup(of: Void.self) { group in
          for operation in sevenCalls {
            group.addTask { await make(operation, on: repository) }
          }
        }
      }
      try await drive(clock, until: calls)
      let entries = repository.log.entries
      #expect(entries.count == 14, "seed \(seed)")
      // Each call's start is followed by its own end, and calls run in their numbered order.
      for (index, entry) in entries.enumerated() {
        #expect(entry.call == index / 2 + 1, "seed \(seed): \(entries)")
        #expect((entry.kind == .start) == index.isMultiple(of: 2), "seed \(seed): \(entries)")
      }
    }
  }

  @Test("calls made one after another from one task reach the service in that order")
  func programOrder() async throws {
    let service = InMemoryNotesService(notes: seedNotes)
    let repository = NotesRepository(service: service)
    for operation in sevenCalls { await make(operation, on: repository) }
    #expect(repository.log.entries.map(\.operation) == sevenCalls.flatMap { [$0, $0] })
    #expect(try await repository.notes().map(\.title) == ["changed", "new"])
  }

  @Test("every operation's failure becomes its own NotesError, keeping the cause")
  func errorMapping() async throws {
    let failures = NotesOperation.allCases.map { InMemoryNotesService.Failure.call(1, of: $0) }
    let repository = NotesRepository(
      service: InMemoryNotesService(notes: seedNotes, failures: failures)
    )
    await #expect(throws: NotesError.fetchNotes(reason: "injected failure: call 1 of fetchNotes")) {
      try await repository.notes()
    }
    await #expect(
      throws: NotesError.fetchNote(id: 1, reason: "injected failure: call 1 of fetchNote")
    ) { try await repository.note(id: 1) }
    await #expect(throws: NotesError.createNote(reason: "injected failure: call 1 of createNote")) {
      try await repository.create(title: "x")
    }
    await #expect(
      throws: NotesError.updateNote(id: 1, reason: "injected failure: call 1 of updateNote")
    ) { try await repository.update(id: 1, title: "x") }
    await #expect(
      throws: NotesError.deleteNote(id: 1, reason: "injected failure: call 1 of deleteNote")
    ) { try await repository.delete(id: 1) }
  }

  @Test("an unknown id or an empty title is a clear NotesError; the repository goes on")
  func badInput() async throws {
    let repository = NotesRepository(service: InMemoryNotesService(notes: seedNotes))
    await #expect(throws: NotesError.fetchNote(id: 99, reason: "no note with id 99")) {
      try await repository.note(id: 99)
    }
    await #expect(throws: NotesError.updateNote(id: 99, reason: "no note with id 99")) {
      try await repository.update(id: 99, title: "x")
    }
    await #expect(throws: NotesError.deleteNote(id: 99, reason: "no note with id 99")) {
      try await repository.delete(id: 99)
    }
    do {
      try await repository.create(title: "   ")
      Issue.record("an empty title was accepted")
    } catch {
      #expect(error.description == "could not create the note: a note needs a title (it was empty)")
    }
    #expect(try await repository.notes().count == 2)
  }

  @Test(
    "a title or text that cannot be stored as given is a clear NotesError; nothing is stored",
    arguments: [
      ("a\0b", "", "a title cannot contain a control character (U+0000, NUL)"),
      ("\0", "", "a title cannot contain a control character (U+0000, NUL)"),
      ("two\nlines", "", "a title cannot contain a control character (U+000A, newline)"),
      ("\u{1B}[2J", "", "a title cannot contain a control character (U+001B, escape)"),
      ("ok", "cut\0here", "the text cannot contain a NUL character (U+0000)"),
    ]
  )
  func textThatCannotBeStored(title: String, body: String, expected: String) async throws {
    let service = InMemoryNotesService(notes: seedNotes)
    let repository = NotesRepository(service: service)
    do {
      try await repository.create(title: title, body: body)
      Issue.record("accepted \(title.debugDescription) / \(body.debugDescription)")
    } catch {
      #expect(error.operation == .createNote)
      #expect(error.reason.hasPrefix(expected), "\(error.reason)")
    }
    await #expect(throws: NotesError.self) {
      try await repository.update(id: 1, title: title, body: body)
    }
    #expect(try await repository.notes() == seedNotes)
    #expect(service.callCounts[.createNote] == nil && service.callCounts[.updateNote] == nil)
    // Control characters other than NUL are kept in a body, exactly.
    let kept = try await repository.create(title: "ok", body: "tab\t, escape \u{1B}, line\n")
    #expect(try await repository.note(id: kept.id).body == "tab\t, escape \u{1B}, line\n")
  }

  @Test("a call cancelled before its turn never reaches the service")
  func cancellation() async throws {
    let clock = ManualClock()
    let service = InMemoryNotesService(latency: .fixed(.seconds(1)), clock: clock)
    let repository = NotesRepository(service: service)
    let first = Task { try await repository.create(title: "first") }
    try await clock.waitForSleepers(1)
    let second = Task { try await repository.create(title: "second") }
    while repository.log.entries.count < 1 { await Task.yield() }
    second.cancel()
    await #expect(throws: NotesError.createNote(reason: "cancelled")) { try await second.value }
    clock.advance(by: .seconds(1))
    #expect(try await first.value.title == "first")
    #expect(service.callCounts[.createNote] == 1)
  }

  @Test("calls still complete after the last reference to the repository is dropped")
  func noSilentEmptyResult() async throws {
    let clock = ManualClock()
    let service = InMemoryNotesService(notes: seedNotes, latency: .fixed(.seconds(1)), clock: clock)
    var repository: NotesRepository? = NotesRepository(service: service)
    let call = Task { [repository] in try await repository?.notes() ?? [] }
    repository = nil
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(1))
    #expect(try await call.value.count == 2)
  }
}

@Suite("InMemoryNotesService")
struct InMemoryNotesServiceTests {
  @Test("CRUD, with identifiers after the largest given one and dates from `now`")
  func crud() async throws {
    let later = start.addingTimeInterval(60)
    let service = InMemoryNotesService(notes: seedNotes, now: { later })
    let created = try await service.createNote(title: "third", body: "c")
    #expect(created.id == 3 && created.createdAt == later)
    let updated = try await service.updateNote(id: 1, title: "first!", body: "a2")
    #expect(updated.updatedAt == later && updated.createdAt == start)
    try await service.deleteNote(id: 2)
    #expect(try await service.fetchNotes().map(\.id) == [1, 3])
    #expect(try await service.fetchNote(id: 2) == nil)
    await #expect(throws: NoteNotFound(id: 2)) { try await service.deleteNote(id: 2) }
  }

  @Test("the n-th call of an operation fails, and only that one")
  func nthCall() async throws {
    let service = InMemoryNotesService(failures: [.call(2, of: .fetchNotes)])
    _ = try await service.fetchNotes()
    await #expect(throws: InjectedFailure(operation: .fetchNotes, call: 2)) {
      try await service.fetchNotes()
    }
    _ = try await service.fetchNotes()
    #expect(service.callCounts[.fetchNotes] == 3)
  }

  @Test("seeded failures repeat for the same seed and differ across seeds; 0 and 1 are exact")
  func seededFailures() async throws {
    func pattern(seed: UInt64, probability: Double) async -> [Bool] {
      let service = InMemoryNotesService(failures: [.probability(probability)], seed: seed)
      var failed: [Bool] = []
      for _ in 0..<40 {
        do {
          _ = try await service.fetchNotes()
          failed.append(false)
        } catch {
          failed.append(true)
        }
      }
      return failed
    }
    let first = await pattern(seed: 7, probability: 0.5)
    #expect(await pattern(seed: 7, probability: 0.5) == first)
    #expect(await pattern(seed: 8, probability: 0.5) != first)
    #expect(first.contains(true) && first.contains(false))
    #expect(await pattern(seed: 7, probability: 0).allSatisfy { !$0 })
    #expect(await pattern(seed: 7, probability: 1).allSatisfy { $0 })
  }

  @Test("latency is waited on the injected clock before the call takes effect")
  func latency() async throws {
    let clock = ManualClock()
    let service = InMemoryNotesService(latencies: [.createNote: .fixed(.seconds(5))], clock: clock)
    let create = Task { try await service.createNote(title: "slow", body: "") }
    try await clock.waitForSleepers(1)
    #expect(try await service.fetchNotes().isEmpty)  // other operations have no latency
    clock.advance(by: .seconds(5))
    _ = try await create.value
    #expect(try await service.fetchNotes().count == 1)
  }
}

@Suite("ActivityLog")
struct ActivityLogTests {
  @Test("entries read as a list and as a sequence that replays, then follows")
  func listAndSequence() async throws {
    let log = ActivityLog()
    _ = try await log.track(.fetchNotes, call: 1, summary: { "\($0) notes" }) { 3 }
    var updates = log.updates.makeAsyncIterator()
    await #expect(throws: TestFailure.self) {
      try await log.track(.deleteNote, call: 2, summary: { "\($0)" }) { throw TestFailure() }
    }
    var seen: [String] = []
    for _ in 0..<4 { if let entry = await updates.next() { seen.append(entry.description) } }
    let expected = [
      "start 1 fetchNotes", "finish 1 fetchNotes: 3 notes", "start 2 deleteNote",
      "error 2 deleteNote: boom",
    ]
    #expect(seen == expected)
    #expect(log.entries.map(\.description) == expected)
  }
}

@Suite("OrderVerdict")
struct OrderVerdictTests {
  private func log(_ lines: [(Int, ActivityEntry.Kind)]) -> ActivityLog {
    let log = ActivityLog()
    for (call, kind) in lines {
      log.write(ActivityEntry(call: call, operation: .fetchNotes, kind: kind))
    }
    return log
  }

  @Test("calls ending in call order are in order, even when they overlap")
  func inOrder() {
    #expect(log([(1, .start), (2, .start), (1, .finish("")), (2, .error(""))]).verdict == .inOrder)
    #expect(ActivityLog().verdict == .inOrder)
  }

  @Test("the first call ending before an earlier one is named")
  func outOfOrder() {
    let verdict = log([(1, .start), (2, .start), (3, .start), (3, .finish("")), (1, .finish(""))])
      .verdict
    #expect(verdict == .outOfOrder(finished: 3, before: 1))
    #expect(verdict.description == "out of order: task 3 finished before task 1")
  }
}

struct TestFailure: Error, CustomStringConvertible {
  var description: String { "boom" }
}
