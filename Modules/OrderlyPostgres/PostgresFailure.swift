// PostgreSQL errors as the OutboxError an outbox caller handles.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
public import OrderlyOutboxCore
public import PostgresNIO

/// How the outbox names its database in errors: `postgresql://USER@HOST:PORT/DATABASE`, never
/// the password.
func describe(_ configuration: PostgresClient.Configuration) -> String {
  let place: String
  if let socket = configuration.unixSocketPath {
    place = socket
  } else {
    place = "\(configuration.host ?? "localhost"):\(configuration.port ?? 5432)"
  }
  return "postgresql://\(configuration.username)@\(place)/\(configuration.database ?? "")"
}

/// The innermost error: PostgresNIO wraps a failed transaction's error.
func unwrap(_ error: any Error) -> any Error {
  if let error = error as? TransactionFailure { return unwrap(error.underlying) }
  if let error = error as? PostgresTransactionError {
    if let inner = error.closureError ?? error.beginError ?? error.commitError {
      return unwrap(inner)
    }
  }
  return error
}

/// Whether a transaction failed because its connection ended before its `COMMIT` was sent, so
/// that nothing of it was stored and it may be run again on another connection: the server
/// ended the connection (SQLSTATE 57P01-57P03: it is shutting down or restarting, or an
/// administrator ended the session, or closed it without saying why), the pool handed out a
/// connection that had just closed, or the connection broke under a statement before the
/// `COMMIT` (`connectionError`, `uncleanShutdown`: a query written to a connection the server
/// had just ended is answered by a reset, "Connection reset by peer", before the server's own
/// message is read; seen under a storm of ended connections).
///
/// A transaction whose connection breaks before its `COMMIT` is rolled back by the server. A
/// failure of the `COMMIT` itself is never retried: the server may have committed before the
/// connection ended. Nor is a statement's answer that a deadline stopped waiting for
/// (``ConnectionLost``): it is not known which statement it was.
func endedBeforeCommit(_ error: any Error) -> Bool {
  if let transaction = error as? PostgresTransactionError, transaction.commitError != nil {
    return false
  }
  if let transaction = error as? TransactionFailure, transaction.stage == .commit {
    return false
  }
  if unwrap(error) is ConnectionEnded { return true }
  guard let error = unwrap(error) as? PSQLError else { return false }
  if [.clientClosedConnection, .serverClosedConnection, .connectionError, .uncleanShutdown]
    .contains(error.code)
  {
    return true
  }
  guard let state = error.serverInfo?[.sqlState] else { return false }
  return ["57P01", "57P02", "57P03"].contains(state)
}

/// A PostgreSQL error as an outbox error that says what went wrong and what to do.
///
/// PostgresNIO's errors print a generic text (so as not to leak data into logs); the server's
/// message and SQLSTATE are read from them here.
func outboxError(_ error: any Error, database: String) -> OutboxError {
  let error = unwrap(error)
  if let error = error as? OutboxError { return error }
  if error is CancellationError { return .cancelled }
  if let error = error as? QueryTimedOut {
    return .cannotOpen(
      path: database,
      reason: "the database did not answer within \(error.limit); check that the server runs "
        + "and accepts connections at that address, then try again (the outcome of the last "
        + "statement is unknown if it was a commit)"
    )
  }
  if error is ConnectionLost {
    return .cannotOpen(
      path: database,
      reason: "the connection closed while a statement waited for its answer; check that the "
        + "server runs and accepts connections at that address, then try again (the outcome of "
        + "the last statement is unknown if it was a commit)"
    )
  }
  if error is ConnectionEnded {
    return .cannotOpen(
      path: database,
      reason: "the connection closed (the server ended it, or it broke); check that the server "
        + "runs and accepts connections at that address, then try again"
    )
  }
  guard let error = error as? PSQLError else {
    // The pool's error type lives in a module PostgresNIO does not make public API; its text
    // is all there is to tell. A request cancelled while it waited for a connection (the task
    // was cancelled while the server could not be reached) stored nothing.
    let text = "\(error)"
    if text.contains("requestCancelled") { return .cancelled }
    if text.contains("poolShutdown") { return .closed(path: database) }
    // It comes after about a minute of refused connections.
    if text.contains("connectionCreationCircuitBreakerTripped") {
      return .cannotOpen(
        path: database,
        reason: "no connection could be made for about a minute: check that the server runs "
          + "and accepts connections at that address, and the user name, password and database "
          + "(open the outbox with PostgresOutbox(url:) to have the server's own message at once)"
      )
    }
    return .storageFailed(path: database, reason: "\(error)")
  }
  if error.code == .queryCancelled { return .cancelled }
  if let info = error.serverInfo {
    let state = info[.sqlState] ?? ""
    let message = info[.message] ?? "the server refused the request"
    let reason = "\(message) (SQLSTATE \(state))"
    switch state {
    // invalid_authorization_specification, invalid_password, invalid_catalog_name (no such
    // database), insufficient_privilege
    case "28000", "28P01", "3D000", "42501":
      return .cannotOpen(path: database, reason: reason)
    // disk_full, out of memory / resources
    case "53100": return .diskFull(path: database)
    // serialization failure, deadlock, lock not available
    case "40001", "40P01", "55P03":
      return .busy(path: database, waited: .zero)
    // too_many_connections: nothing ran; the server has no connection slot left
    case "53300":
      return .cannotOpen(
        path: database,
        reason: "the server has no connection slot left (\(message), SQLSTATE 53300): raise its "
          + "max_connections, or give the clients of the workers and tools on it a lower "
          + "maximumConnections, then try again"
      )
    // admin_shutdown, crash_shutdown, cannot_connect_now: the server ended the connection (it
    // is shutting down or restarting, or an administrator ended the session); what ran on it
    // did not commit.
    case "57P01", "57P02", "57P03":
      return .cannotOpen(
        path: database,
        reason: "the server ended the connection (\(message), SQLSTATE \(state)); check that it "
          + "runs and accepts connections at that address, then try again"
      )
    default:
      return .storageFailed(path: database, reason: reason)
    }
  }
  switch error.code {
  case .connectionError, .serverClosedConnection, .uncleanShutdown:
    let underlying = error.underlying.map { ": \($0)" } ?? ""
    return .cannotOpen(
      path: database,
      reason: "cannot reach the server (\(error.code))\(underlying); check that it runs and "
        + "accepts connections at that address"
    )
  case .poolClosed:
    return .closed(path: database)
  case .clientClosedConnection:
    return .cannotOpen(
      path: database,
      reason: "the connection closed (the server ended it, or it broke); check that the server "
        + "runs and accepts connections at that address, then try again"
    )
  case .authMechanismRequiresPassword, .unsupportedAuthMechanism, .saslError:
    return .cannotOpen(path: database, reason: "authentication failed (\(error.code))")
  default:
    return .storageFailed(path: database, reason: "\(error.code)")
  }
}

extension PostgresClient.Configuration {
  /// A configuration from a URL, as `psql` takes it.
  ///
  /// The URL is `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (or `postgres://...`),
  /// optionally followed by `?search_path=SCHEMA` (the schema the outbox's tables are in, when
  /// it is not the user's default), `&application_name=NAME` and `&plan_cache_mode=MODE`. TLS
  /// is off: for a server on this machine or a private network; set `tls` on the result for
  /// anything else.
  ///
  /// The connections plan prepared statements once (`plan_cache_mode=force_generic_plan`, a
  /// startup parameter in `options.additionalStartupParameters`) unless the URL names another
  /// mode (`auto`, PostgreSQL's default, or `force_custom_plan`). The worker's statements are
  /// written for one plan per connection (and checked to keep it under the default too),
  /// but under the default a connection decides from the estimated costs of its first
  /// executions, made while the tables were new: under the benchmark harness every connection
  /// went over to planning each acknowledgement for its parameters at the tables' first
  /// automatic `ANALYZE` and stayed there (92 % of acknowledgements planned again, 29 % of the
  /// machine's time in PostgreSQL's planner). The setting applies to every query on this
  /// client's connections. A client you configure yourself gets it by the same startup
  /// parameter, or from `ALTER ROLE ... SET plan_cache_mode = force_generic_plan` for the
  /// workers' role; a worker that finds another mode says so when it starts.
  ///
  /// - Parameter url: The URL.
  /// - Throws: `OutboxError.invalidOption(_:)` when it is not such a URL, names another
  ///   parameter, or a plan cache mode PostgreSQL does not know.
  public init(orderlyURL url: String) throws(OutboxError) {
    guard let parts = URLComponents(string: url),
      parts.scheme == "postgres" || parts.scheme == "postgresql",
      let host = parts.host, !host.isEmpty
    else {
      throw .invalidOption(
        "\"\(url)\" is not a PostgreSQL URL: write postgresql://USER@HOST:PORT/DATABASE"
      )
    }
    var startup: [(String, String)] = []
    for item in parts.queryItems ?? [] {
      guard ["search_path", "application_name", "plan_cache_mode"].contains(item.name),
        let value = item.value, !value.isEmpty
      else {
        throw .invalidOption(
          "\"\(url)\" has the parameter \"\(item.name)\": a PostgreSQL URL for Orderly takes "
            + "only search_path=SCHEMA, application_name=NAME and plan_cache_mode=MODE, each "
            + "with a value"
        )
      }
      if item.name == "plan_cache_mode", !Self.planCacheModes.contains(value) {
        throw .invalidOption(
          "\"\(url)\" has plan_cache_mode=\(value): write one of "
            + Self.planCacheModes.joined(separator: ", ")
            + " (or leave it out: Orderly's default is force_generic_plan)"
        )
      }
      startup.append((item.name, value))
    }
    if !startup.contains(where: { $0.0 == "plan_cache_mode" }) {
      startup.append(("plan_cache_mode", "force_generic_plan"))
    }
    let database = parts.path.hasPrefix("/") ? String(parts.path.dropFirst()) : parts.path
    self.init(
      host: host,
      port: parts.port ?? 5432,
      username: parts.user ?? "postgres",
      password: parts.password,
      database: database.isEmpty ? nil : database,
      tls: .disable
    )
    options.additionalStartupParameters = startup
  }

  /// The values PostgreSQL takes for `plan_cache_mode`.
  static let planCacheModes = ["force_generic_plan", "auto", "force_custom_plan"]
}
#endif
