import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NotesSyncClient
import NotesSyncServer
import OrderlyOutbox
import OrderlyRepository
import OrderlySQLite
import OrderlyTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh folder, removed when released.
final class Scratch {
  let url = FileManager.default.temporaryDirectory
    .appendingPathComponent("orderly-notes-sync-tests-\(UUID().uuidString)")
  init() throws {
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }
  func path(_ name: String) -> String { url.appendingPathComponent(name).path }
  deinit { try? FileManager.default.removeItem(at: url) }
}

/// The app's local notes, as the server keeps them.
func localNotes(_ service: OfflineNotesService) async throws -> [Note.ID: NoteText] {
  Dictionary(
    uniqueKeysWithValues: try await service.fetchNotes().map {
      ($0.id, NoteText(title: $0.title, body: $0.body))
    }
  )
}

/// A run of offline edits over a few notes: creations, edits and deletions, seeded.
func makeEdits(_ service: OfflineNotesService, count: Int, seed: UInt64) async throws {
  var state = seed
  func next(_ bound: Int) -> Int {
    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    return Int((state >> 33) % UInt64(bound))
  }
  var alive: [Note.ID] = []
  for index in 0..<count {
    switch next(10) {
    case 0..<3 where alive.count < 12:
      alive.append(try await service.createNote(title: "note \(index)", body: "").id)
    case 3 where !alive.isEmpty:
      try await service.deleteNote(id: alive.remove(at: next(alive.count)))
    default:
      if alive.isEmpty {
        alive.append(try await service.createNote(title: "note \(index)", body: "").id)
      } else {
        let id = alive[next(alive.count)]
        _ = try await service.updateNote(id: id, title: "edit \(index)", body: "body \(index)")
      }
    }
  }
}

/// The example's binary, built beside this test bundle.
func notesSyncBinary() -> URL {
  URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("notes-sync")
}

@Suite("The notes sync: a Hummingbird server, an AsyncHTTPClient outbox delivery", .serialized)
struct NotesSyncTests {
  @Test("the server applies a key once, and answers 400 and 409 where resending cannot help")
  func server() async throws {
    let store = NotesStore()
    let server = try await NotesSyncServer.start(store: store)
    let client = NotesSyncClient(baseURL: server.baseURL)
    let create = Envelope(
      id: UUID(),
      sequence: 1,
      partition: nil,
      message: NoteMutation.create(id: 1, title: "a", body: ""),
      attempt: 1,
      appendedAt: Date()
    )
    try await client.deliver(create)
    try await client.deliver(create)
    #expect(await store.log == [.create(id: 1, title: "a", body: "")])
    #expect(await store.duplicates == 1)
    let conflict = Envelope(
      id: UUID(),
      sequence: 2,
      partition: nil,
      message: NoteMutation.update(id: 9, title: "b", body: ""),
      attempt: 1,
      appendedAt: Date()
    )
    await #expect(throws: PermanentDeliveryFailure.self) { try await client.deliver(conflict) }
    var request = HTTPClientRequest(url: server.baseURL + "/mutations")
    request.method = .POST
    let missingKey = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
    #expect(missingKey.status.code == 400)
    request.headers.add(name: "Idempotency-Key", value: UUID().uuidString)
    request.body = .bytes(Array("not json".utf8))
    let badBody = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
    #expect(badBody.status.code == 400)
    #expect(try await client.notes() == [1: NoteText(title: "a", body: "")])
    await server.stop()
  }

  @Test("a key sent again with another body is a conflict, never a silent duplicate")
  func reusedKey() async throws {
    let store = NotesStore()
    let server = try await NotesSyncServer.start(store: store)
    let client = NotesSyncClient(baseURL: server.baseURL)
    let id = UUID()
    func envelope(_ mutation: NoteMutation) -> Envelope<NoteMutation> {
      Envelope(
        id: id,
        sequence: 1,
        partition: nil,
        message: mutation,
        attempt: 1,
        appendedAt: Date()
      )
    }
    try await client.deliver(envelope(.create(id: 1, title: "a", body: "")))
    try await client.deliver(envelope(.create(id: 1, title: "a", body: "")))
    #expect(await store.duplicates == 1)
    do {
      try await client.deliver(envelope(.create(id: 1, title: "changed", body: "")))
      Issue.record("a reused key with another body was accepted")
    } catch let failure as PermanentDeliveryFailure {
      #expect(failure.reason.contains("409"), "\(failure)")
      #expect(failure.reason.contains("came before with another mutation"), "\(failure)")
    }
    #expect(await store.log == [.create(id: 1, title: "a", body: "")])
    await server.stop()
  }

  @Test("a body over the server's limit is answered 413 with the limit; the client says so")
  func bodyTooLarge() async throws {
    let store = NotesStore()
    let server = try await NotesSyncServer.start(store: store)
    let client = NotesSyncClient(baseURL: server.baseURL)
    let large = Envelope(
      id: UUID(),
      sequence: 1,
      partition: nil,
      message: NoteMutation.create(
        id: 1,
        title: "big",
        body: String(repeating: "x", count: 3_000_000)
      ),
      attempt: 1,
      appendedAt: Date()
    )
    do {
      try await client.deliver(large)
      Issue.record("a 3 MB body was accepted")
    } catch let failure as PermanentDeliveryFailure {
      #expect(failure.reason.contains("too large"), "\(failure)")
      #expect(failure.reason.contains("413"), "\(failure)")
      #expect(failure.reason.contains("\(NotesSyncServer.maximumBodySize) bytes"), "\(failure)")
    }
    #expect(await store.log.isEmpty)
    await server.stop()
  }

  @Test("300 offline edits, then online: the server ends with the app's notes, applied in order")
  func endToEnd() async throws {
    let scratch = try Scratch()
    let service = try OfflineNotesService(path: scratch.path("notes.sqlite"))
    try await makeEdits(service, count: 300, seed: 5)
    let store = NotesStore()
    let server = try await NotesSyncServer.start(store: store)
    var appended: [NoteMutation] = []
    for letter in try await service.outbox.deadLetters() { Issue.record("dead letter \(letter)") }
    let pending = service.outbox.pendingCount
    #expect(pending > 0)
    let recorder = OrderedRecorder<NoteMutation>()
    try service.outbox.start { envelope in
      try await NotesSyncClient(baseURL: server.baseURL).deliver(envelope)
      recorder.record(envelope.message)
    }
    try await service.outbox.waitUntilDelivered()
    appended = recorder.values
    #expect(await store.log == appended)
    #expect(appended.count == pending)
    #expect(try await NotesSyncClient(baseURL: server.baseURL).notes() == localNotes(service))
    try await service.close()
    await server.stop()
  }

  @Test("server down, then up: retries on the injected clock, then the outbox drains in order")
  func serverDownThenUp() async throws {
    let scratch = try Scratch()
    let clock = ManualClock()
    let service = try OfflineNotesService(path: scratch.path("notes.sqlite"), clock: clock)
    try await makeEdits(service, count: 40, seed: 9)
    let store = NotesStore()
    // Learn a free port, then stop listening on it: the server is down.
    let first = try await NotesSyncServer.start(store: store)
    let port = first.port
    await first.stop()
    // With no server, AsyncHTTPClient retries the connection until the timeout: keep it short.
    let client = NotesSyncClient(baseURL: first.baseURL, timeout: .milliseconds(300))
    var events = service.outbox.events.makeAsyncIterator()
    try service.outbox.start(retry: try RetryPolicy(jitter: 0), deliver: client.deliver)
    for expected in [Duration.seconds(1), .seconds(2)] {
      var delay: Duration?
      while delay == nil, let event = await events.next() {
        if case .retrying(_, 1, _, let wait, _) = event { delay = wait }
      }
      #expect(delay == expected)
      try await clock.waitForSleepers(1)
      if expected == .seconds(2) {
        let again = try await NotesSyncServer.start(store: store, port: port)
        clock.advance(by: expected)
        try await service.outbox.waitUntilDelivered()
        #expect(try await client.notes() == localNotes(service))
        #expect(await store.duplicates == 0)
        await again.stop()
      } else {
        clock.advance(by: expected)
      }
    }
    try await service.close()
  }

  @Test("SIGKILL of the app while a mutation is in flight: sent again on restart, applied once")
  func killDuringDelivery() async throws {
    let scratch = try Scratch()
    let path = scratch.path("notes.sqlite")
    let offline = try OfflineNotesService(path: path, mergesEdits: false)
    for index in 1...5 { _ = try await offline.createNote(title: "n\(index)", body: "") }
    try await offline.close()

    let store = NotesStore()
    let server = try await NotesSyncServer.start(store: store)
    // The server applies the third mutation, then never answers: the app dies waiting.
    let (applied, appliedSink) = AsyncStream.makeStream(of: NoteMutation.self)
    let hold = Gate()
    await store.setAfterApplying { mutation in
      appliedSink.yield(mutation)
      if mutation.noteID == 3 { try? await hold.wait() }
    }
    let app = Process()
    app.executableURL = notesSyncBinary()
    app.arguments = ["deliver", path, server.baseURL]
    app.standardOutput = FileHandle.nullDevice
    try app.run()
    var seen = 0
    for await mutation in applied {
      seen += 1
      if mutation.noteID == 3 { break }
    }
    #expect(seen == 3)
    kill(app.processIdentifier, SIGKILL)
    await withCheckedContinuation { continuation in
      Thread {
        app.waitUntilExit()
        continuation.resume()
      }.start()
    }
    #expect(app.terminationReason == .uncaughtSignal)
    hold.open()
    await store.setAfterApplying(nil)

    let restarted = try OfflineNotesService(path: path)
    #expect(restarted.outbox.pendingCount == 3)
    try restarted.outbox.start(deliver: NotesSyncClient(baseURL: server.baseURL).deliver)
    try await restarted.outbox.waitUntilDelivered()
    #expect(await store.duplicates == 1)
    #expect(await store.log.map(\.noteID) == [1, 2, 3, 4, 5])
    #expect(try await NotesSyncClient(baseURL: server.baseURL).notes() == localNotes(restarted))
    try await restarted.close()
    await server.stop()
  }

  @Test("the example tells the whole story and ends with server and app in agreement")
  func example() throws {
    let process = Process()
    process.executableURL = notesSyncBinary()
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    #expect(text.contains("The app is killed (SIGKILL) before it ever went online."))
    #expect(text.contains("The app starts again: 4 mutations wait in its outbox."))
    #expect(text.hasSuffix("Server and app agree: 2 notes.\n"))
  }
}
