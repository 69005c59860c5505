#if Server
public import Foundation
public import Instrumentation
public import OrderlyOutboxCore
import Tracing

/// Writes a trace context into a message's headers.
struct HeadersInjector: Injector {
  func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
    carrier[key] = value
  }
}

/// Reads a trace context from a message's headers.
struct HeadersExtractor: Extractor {
  func extract(key: String, from carrier: [String: String]) -> String? {
    carrier[key]
  }
}

extension DurableOutbox {
  /// Appends a message with the caller's trace context in its headers, so that its delivery,
  /// maybe in another process after a restart, is linked to the request that caused it.
  ///
  /// The instrument writes the context (for W3C trace context, a `traceparent` header) with
  /// `append(_:partition:headers:)`; ``OutboxService`` reads it back when it delivers.
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Other headers to store with it.
  ///   - context: The trace context to carry; the task's current one by default.
  ///   - instrument: What writes it; the process's bootstrapped instrument by default.
  /// - Returns: The message's identifier.
  /// - Throws: As `append(_:partition:headers:)`.
  @discardableResult
  public func appendTraced(
    _ message: Message,
    partition: String? = nil,
    headers: [String: String] = [:],
    context: ServiceContext? = ServiceContext.current,
    instrument: any Instrument = InstrumentationSystem.instrument
  ) async throws(OutboxError) -> UUID {
    try await append(
      message,
      partition: partition,
      headers: tracingHeaders(context, into: headers, using: instrument)
    )
  }
}

/// `headers` with `context` injected by `instrument`, as the delivery's span reads them back.
func tracingHeaders(
  _ context: ServiceContext?,
  into headers: [String: String],
  using instrument: any Instrument
) -> [String: String] {
  guard let context else { return headers }
  var headers = headers
  instrument.inject(context, into: &headers, using: HeadersInjector())
  return headers
}

/// The headers that carry a trace context with a message, for an append in the app's own
/// transaction, which ``OrderlyOutboxCore/DurableOutbox/appendTraced(_:partition:headers:context:instrument:)``
/// cannot make.
///
/// ```swift
/// try dbQueue.write { db in
///   try order.save(db)
///   let headers = OutboxTraceHeaders.current()
///   try outbox.append(order.event, partition: order.key, headers: headers, in: db)
/// }
/// ```
///
/// ``OutboxService`` reads the context back when it delivers the message, as it does for
/// `appendTraced`. On PostgreSQL, pass them to `append(_:partition:headers:on:)` the same way.
public enum OutboxTraceHeaders {
  /// `headers` with `context` written into them by `instrument` (for W3C trace context, a
  /// `traceparent` header); `headers` as they are when there is no context.
  ///
  /// - Parameters:
  ///   - headers: Other headers to store with the message.
  ///   - context: The trace context to carry; the task's current one by default.
  ///   - instrument: What writes it; the process's bootstrapped instrument by default.
  /// - Returns: The headers to append the message with.
  public static func current(
    adding headers: [String: String] = [:],
    context: ServiceContext? = ServiceContext.current,
    instrument: any Instrument = InstrumentationSystem.instrument
  ) -> [String: String] {
    tracingHeaders(context, into: headers, using: instrument)
  }
}

/// Runs each delivery in a span of its own, linked to the trace its message was appended in.
struct DeliverySpans: Sendable {
  private let run:
    @Sendable (
      _ name: String,
      _ attributes: SpanAttributes,
      _ links: [ServiceContext],
      _ body: @Sendable () async throws -> Void
    ) async throws -> Void
  private let extract: @Sendable ([String: String]) -> ServiceContext?

  init(tracer: some Tracer) {
    run = { name, attributes, links, body in
      try await tracer.withSpan(name, context: .topLevel, ofKind: .consumer) { span in
        span.attributes = attributes
        for link in links { span.addLink(SpanLink(context: link, attributes: [:])) }
        try await body()
      }
    }
    extract = { headers in
      guard !headers.isEmpty else { return nil }
      var context = ServiceContext.topLevel
      tracer.extract(headers, into: &context, using: HeadersExtractor())
      return context
    }
  }

  /// The span's name: `orderly.outbox.deliver`.
  static let operationName = "orderly.outbox.deliver"

  func deliver<Message>(
    _ envelope: Envelope<Message>,
    outboxName: String,
    _ body: @escaping @Sendable () async throws -> Void
  ) async throws {
    var attributes = SpanAttributes()
    attributes["orderly.outbox"] = outboxName
    attributes["orderly.outbox.message_id"] = envelope.id.uuidString
    attributes["orderly.outbox.attempt"] = envelope.attempt
    attributes["orderly.outbox.sequence"] = Int(envelope.sequence)
    if let partition = envelope.partition { attributes["orderly.outbox.partition"] = partition }
    let links = extract(envelope.headers).map { [$0] } ?? []
    try await run(Self.operationName, attributes, links, body)
  }

  /// Runs a batch's delivery in one span: the first message's attributes, the batch's size
  /// (`orderly.outbox.batch_size`) and last sequence (`orderly.outbox.last_sequence`), linked to
  /// each message's stored context.
  func deliver<Message>(
    batch envelopes: [Envelope<Message>],
    outboxName: String,
    _ body: @escaping @Sendable () async throws -> Void
  ) async throws {
    var attributes = SpanAttributes()
    attributes["orderly.outbox"] = outboxName
    attributes["orderly.outbox.batch_size"] = envelopes.count
    if let first = envelopes.first {
      attributes["orderly.outbox.message_id"] = first.id.uuidString
      attributes["orderly.outbox.attempt"] = first.attempt
      attributes["orderly.outbox.sequence"] = Int(first.sequence)
      if let partition = first.partition { attributes["orderly.outbox.partition"] = partition }
    }
    if let last = envelopes.last { attributes["orderly.outbox.last_sequence"] = Int(last.sequence) }
    let links = envelopes.compactMap { extract($0.headers) }
    try await run(Self.operationName, attributes, links, body)
  }
}
#endif
