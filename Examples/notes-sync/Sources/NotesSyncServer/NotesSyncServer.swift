import Foundation
import HTTPTypes
public import Hummingbird
import Logging
public import OrderlyRepository

/// The notes sync server: `POST /mutations` applies one ``NoteMutation`` once per
/// `Idempotency-Key`, `GET /notes` lists the notes.
///
/// Answers to `POST /mutations`:
/// - `200 applied` or `200 duplicate` (the key was applied before: nothing changed);
/// - `400` for a missing or malformed `Idempotency-Key` or body: resending cannot help;
/// - `409` for a mutation the notes do not allow (a note created twice, an update of a missing
///   note), or a key that came before with a different body: resending cannot help either;
/// - `413` for a body larger than ``maximumBodySize``, with the limit in the answer.
public enum NotesSyncServer {
  /// The header that carries a mutation's idempotency key.
  public static let idempotencyKey = "Idempotency-Key"

  /// The largest body `POST /mutations` accepts by default: 2 MiB.
  public static let maximumBodySize = 2 * 1024 * 1024

  /// The routes, on `store`.
  ///
  /// - Parameters:
  ///   - store: Where the notes are kept.
  ///   - maximumBodySize: The largest body accepted, in bytes; a larger one is answered `413`.
  /// - Returns: A router for an `Application`.
  public static func router(
    store: NotesStore,
    maximumBodySize: Int = maximumBodySize
  ) -> Router<BasicRequestContext> {
    let router = Router()
    let keyField = HTTPField.Name(idempotencyKey)
    router.post("mutations") { request, context -> Response in
      guard let keyField, let text = request.headers[keyField] else {
        throw HTTPError(.badRequest, message: "missing \(idempotencyKey) header")
      }
      guard let key = UUID(uuidString: text) else {
        throw HTTPError(.badRequest, message: "\(idempotencyKey) is not a UUID: \(text)")
      }
      let body: ByteBuffer
      do {
        body = try await request.body.collect(upTo: maximumBodySize)
      } catch {
        throw HTTPError(
          .contentTooLarge,
          message: "the body is larger than \(maximumBodySize) bytes, the most this server "
            + "accepts"
        )
      }
      let mutation: NoteMutation
      do {
        mutation = try JSONDecoder().decode(NoteMutation.self, from: Data(body.readableBytesView))
      } catch {
        throw HTTPError(.badRequest, message: "the body is not a note mutation")
      }
      switch await store.apply(mutation, key: key) {
      case .applied: return answer(.ok, "applied")
      case .duplicate: return answer(.ok, "duplicate")
      case .conflict(let reason): return answer(.conflict, reason)
      }
    }
    router.get("notes") { _, _ -> Response in
      let notes = await store.notes.sorted { $0.key < $1.key }.map {
        NoteRecord(id: $0.key, title: $0.value.title, body: $0.value.body)
      }
      let encoder = JSONEncoder()
      encoder.outputFormatting = .sortedKeys
      let data = (try? encoder.encode(notes)) ?? Data("[]".utf8)
      var headers = HTTPFields()
      headers[.contentType] = "application/json"
      return Response(
        status: .ok,
        headers: headers,
        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
      )
    }
    return router
  }

  private static func answer(_ status: HTTPResponse.Status, _ body: String) -> Response {
    Response(status: status, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
  }

  /// Starts the server on loopback.
  ///
  /// - Parameters:
  ///   - store: Where the notes are kept.
  ///   - port: The port; 0 (the default) takes a free one.
  ///   - maximumBodySize: The largest body accepted, in bytes.
  /// - Returns: The running server, with its port.
  /// - Throws: If the server cannot listen on the port.
  public static func start(
    store: NotesStore,
    port: Int = 0,
    maximumBodySize: Int = maximumBodySize
  ) async throws -> RunningServer {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let application = Application(
      router: router(store: store, maximumBodySize: maximumBodySize),
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: port)),
      onServerRunning: { channel in
        continuation.yield(channel.localAddress?.port ?? port)
        continuation.finish()
      },
      logger: Logger(label: "notes-sync-server", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    let task = Task { try await application.runService(gracefulShutdownSignals: []) }
    var iterator = ports.makeAsyncIterator()
    guard let bound = await iterator.next() else {
      try await task.value
      throw CancellationError()
    }
    return RunningServer(port: bound, task: task)
  }
}

/// A note as `GET /notes` lists it.
public struct NoteRecord: Codable, Sendable, Hashable {
  /// The note's identifier.
  public let id: Note.ID
  /// Its title.
  public let title: String
  /// Its text.
  public let body: String

  /// A note record.
  public init(id: Note.ID, title: String, body: String) {
    self.id = id
    self.title = title
    self.body = body
  }
}

/// A server started by ``NotesSyncServer/start(store:port:maximumBodySize:)``.
public struct RunningServer: Sendable {
  /// The port it listens on, on 127.0.0.1.
  public let port: Int
  let task: Task<Void, any Error>

  /// `http://127.0.0.1:PORT`.
  public var baseURL: String { "http://127.0.0.1:\(port)" }

  /// Stops the server and waits until it has stopped listening.
  public func stop() async {
    task.cancel()
    _ = await task.result
  }
}
