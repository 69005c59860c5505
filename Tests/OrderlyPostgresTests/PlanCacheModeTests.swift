// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import InMemoryLogging
import Logging
import OrderlyOutboxCore
@testable import OrderlyPostgres
import PostgresNIO
import Testing

/// Connections made from an Orderly URL plan the worker's statements once
/// (`plan_cache_mode=force_generic_plan`), unless the URL says otherwise; a worker whose
/// connections plan for each call's parameters says so when it starts.
@Suite("Connections from an Orderly URL keep one plan per statement", .timeLimit(.minutes(2)))
struct PlanCacheModeTests {
  private func mode(in configuration: PostgresClient.Configuration) -> [String] {
    configuration.options.additionalStartupParameters.filter { $0.0 == "plan_cache_mode" }
      .map(\.1)
  }

  @Test("the URL's configuration asks for one plan per statement, unless the URL names a mode")
  func urlSetsTheMode() throws {
    let plain = try PostgresClient.Configuration(orderlyURL: "postgresql://app@db:5432/app")
    #expect(mode(in: plain) == ["force_generic_plan"])
    let withSchema = try PostgresClient.Configuration(
      orderlyURL: "postgresql://app@db/app?search_path=jobs&application_name=worker"
    )
    #expect(mode(in: withSchema) == ["force_generic_plan"])
    let names = withSchema.options.additionalStartupParameters.map(\.0)
    #expect(names == ["search_path", "application_name", "plan_cache_mode"])
    for chosen in ["auto", "force_custom_plan", "force_generic_plan"] {
      let configuration = try PostgresClient.Configuration(
        orderlyURL: "postgresql://app@db/app?plan_cache_mode=\(chosen)"
      )
      #expect(mode(in: configuration) == [chosen])
    }
  }

  @Test("a plan cache mode PostgreSQL does not know is refused, naming the ones it does")
  func unknownModeRefused() {
    #expect(
      throws: OutboxError.invalidOption(
        "\"postgresql://app@db/app?plan_cache_mode=generic\" has plan_cache_mode=generic: write one of force_generic_plan, auto, force_custom_plan (or leave it out: Orderly's default is force_generic_plan)"
      )
    ) {
      try PostgresClient.Configuration(
        orderlyURL: "postgresql://app@db/app?plan_cache_mode=generic"
      )
    }
    #expect(throws: OutboxError.self) {
      try PostgresClient.Configuration(orderlyURL: "postgresql://app@db/app?plan_cache_mode=")
    }
  }

  /// `url` with `plan_cache_mode=mode` added to its query.
  private func url(_ url: String, planCacheMode mode: String) throws -> String {
    var parts = try #require(URLComponents(string: url))
    parts.queryItems =
      (parts.queryItems ?? []) + [URLQueryItem(name: "plan_cache_mode", value: mode)]
    return try #require(parts.string)
  }

  /// Starts a worker on `client` with a logger kept in memory, delivers one message, and returns
  /// the worker's log.
  private func startLog(client: PostgresClient) async throws -> [InMemoryLogHandler.Entry] {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "plan-cache-mode") { _ in handler }
    logger.logLevel = .notice
    let outbox = try await PostgresOutbox<String>(client: client, logger: logger)
    try await outbox.append("m", partition: "k")
    try outbox.start { _ in }
    try await outbox.waitUntilDelivered()
    // The worker reads the mode before it takes its first line: once a message is delivered,
    // whatever it had to say has been said.
    await outbox.stop()
    return handler.entries
  }

  @Test(
    "a worker on a client from the URL runs with one plan per statement and says nothing; on a client whose URL asks for PostgreSQL's default it says what to set"
  )
  func workerSaysSo() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }

    let client = try database.client()
    var shown = ""
    for try await value in try await client.query("SHOW plan_cache_mode", logger: TestServer.logger)
      .decode(String.self)
    {
      shown = value
    }
    #expect(shown == "force_generic_plan")
    let quiet = try await startLog(client: client)
    let quietNotice = quiet.first { $0.metadata["plan_cache_mode"] != nil }
    #expect(quietNotice == nil)

    let auto = try database.client(url: try url(database.url, planCacheMode: "auto"))
    let entries = try await startLog(client: auto)
    let notice = entries.first { $0.metadata["plan_cache_mode"] != nil }
    #expect(notice?.level == .notice)
    #expect(notice?.metadata["plan_cache_mode"]?.description == "auto")
    let message = notice?.message.description ?? ""
    #expect(message.contains("plan_cache_mode=force_generic_plan"), "\(message)")
  }
}
#endif
