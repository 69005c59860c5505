public import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
public import OrderlyOutbox
public import OrderlyRepository

/// Sends an outbox's note mutations to the notes sync server, one request each, with the
/// message's identifier as its `Idempotency-Key`.
///
/// ```swift
/// let client = NotesSyncClient(baseURL: "http://127.0.0.1:8080")
/// try notes.outbox.start(deliver: client.deliver)
/// ```
///
/// A `2xx` answer delivers the message. A `4xx` answer other than 408 and 429 means resending
/// cannot help: it is thrown as a `PermanentDeliveryFailure` whose reason says why (for `413`,
/// the message's size and the server's limit), and the message becomes a dead letter, reported
/// by the outbox's `deadLettered` event and by `waitUntilDelivered()`. Anything else (no
/// connection, a timeout, a `5xx`) is thrown as is, and retried.
public struct NotesSyncClient: Sendable {
  /// The server, as `http://HOST:PORT`.
  public let baseURL: String
  /// How long one request may take.
  ///
  /// While the server is down, an attempt lasts this long: AsyncHTTPClient keeps retrying the
  /// connection until then.
  public let timeout: Duration
  private let http: HTTPClient

  /// A client for the server at `baseURL`.
  ///
  /// - Parameters:
  ///   - baseURL: `http://HOST:PORT`, without a trailing slash.
  ///   - timeout: How long one request may take; 10 seconds by default.
  ///   - http: The HTTP client; the shared one by default.
  public init(baseURL: String, timeout: Duration = .seconds(10), http: HTTPClient = .shared) {
    self.baseURL = baseURL
    self.timeout = timeout
    self.http = http
  }

  /// Sends one mutation.
  ///
  /// - Parameter envelope: The outbox message.
  /// - Throws: `PermanentDeliveryFailure` for an answer resending cannot change;
  ///   ``ServerAnswer`` for a retryable status; the HTTP client's error when there is no
  ///   answer.
  @Sendable public func deliver(_ envelope: Envelope<NoteMutation>) async throws {
    var request = HTTPClientRequest(url: baseURL + "/mutations")
    request.method = .POST
    request.headers.add(name: "Idempotency-Key", value: envelope.id.uuidString)
    request.headers.add(name: "Content-Type", value: "application/json")
    let payload = try JSONEncoder().encode(envelope.message)
    request.body = .bytes(ByteBuffer(bytes: payload))
    let response = try await http.execute(request, timeout: .nanoseconds(nanoseconds))
    let body = try await response.body.collect(upTo: 64 * 1024)
    let status = Int(response.status.code)
    if (200..<300).contains(status) { return }
    let answer = ServerAnswer(status: status, body: String(buffer: body))
    if status == 413 {
      throw PermanentDeliveryFailure(
        "the server refused message \(envelope.id) as too large (\(payload.count) bytes; "
          + "413): \(answer.body)"
      )
    }
    if (400..<500).contains(status) && status != 408 && status != 429 {
      throw PermanentDeliveryFailure("the server refused \(envelope.message): \(answer)")
    }
    throw answer
  }

  /// The server's notes.
  ///
  /// - Returns: The notes, by identifier.
  /// - Throws: ``ServerAnswer`` for a status other than 200; the HTTP client's error.
  public func notes() async throws -> [Note.ID: NoteText] {
    let request = HTTPClientRequest(url: baseURL + "/notes")
    let response = try await http.execute(request, timeout: .nanoseconds(nanoseconds))
    let body = try await response.body.collect(upTo: 16 * 1024 * 1024)
    guard response.status.code == 200 else {
      throw ServerAnswer(status: Int(response.status.code), body: String(buffer: body))
    }
    struct Record: Decodable {
      let id: Note.ID
      let title: String
      let body: String
    }
    let records = try JSONDecoder().decode([Record].self, from: Data(body.readableBytesView))
    return Dictionary(
      uniqueKeysWithValues: records.map { ($0.id, NoteText(title: $0.title, body: $0.body)) }
    )
  }

  private var nanoseconds: Int64 {
    let (seconds, attoseconds) = timeout.components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  }
}

/// A status the server answered with, other than success.
public struct ServerAnswer: Error, Sendable, Equatable, CustomStringConvertible {
  /// The HTTP status code.
  public let status: Int
  /// The body, as text.
  public let body: String

  /// `409: cannot update note 7: ...`.
  public var description: String { "\(status): \(body)" }
}
