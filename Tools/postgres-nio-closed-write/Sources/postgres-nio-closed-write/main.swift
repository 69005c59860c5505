// A query on a PostgresConnection whose server ended it: does it ever end?
//
//   swift run --package-path Tools/postgres-nio-closed-write postgres-nio-closed-write URL
//
// URL: postgres://USER@HOST:PORT/DATABASE of a server the user may call pg_terminate_backend
// on (its own connections are enough). Exit status 0: every query ended (with an error);
// 1: a query on the closed connection was still unanswered after 5 seconds.
import Foundation
import Logging
import NIOCore
import PostgresNIO

guard CommandLine.arguments.count == 2, let url = URL(string: CommandLine.arguments[1]),
  let host = url.host, let user = url.user
else {
  FileHandle.standardError.write(
    Data("usage: postgres-nio-closed-write postgres://USER@HOST:PORT/DATABASE\n".utf8)
  )
  exit(2)
}
let configuration = PostgresConnection.Configuration(
  host: host,
  port: url.port ?? 5432,
  username: user,
  password: url.password,
  database: String(url.path.dropFirst()),
  tls: .disable
)
let logger = Logger(label: "closed-write")

func connect(_ id: Int) async throws -> PostgresConnection {
  try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
}

/// Runs `SELECT 1` on `connection`, and says how it ended, or that it had not after 5 seconds.
///
/// The query runs in a task of its own that is left behind if it never ends: a task group
/// would wait for it, and this program with it.
func attempt(_ connection: PostgresConnection) async -> String {
  let (outcomes, continuation) = AsyncStream.makeStream(of: String.self)
  Task {
    do {
      for try await _ in try await connection.query("SELECT 1", logger: logger) {}
      continuation.yield("answered")
    } catch {
      continuation.yield("failed: \(String(describing: error).prefix(80))")
    }
  }
  Task {
    try? await Task.sleep(for: .seconds(5))
    continuation.yield("NOT ANSWERED after 5 s")
  }
  for await outcome in outcomes { return outcome }
  return "?"
}

/// Prints a line at once (standard output may be a pipe).
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let admin = try await connect(1)
var hung = 0
let rounds = 5
for round in 1...rounds {
  let victim = try await connect(round + 1)
  var pid: Int32 = 0
  for try await value in try await victim.query("SELECT pg_backend_pid()", logger: logger)
    .decode(Int32.self)
  {
    pid = value
  }
  let terminate: PostgresQuery = "SELECT pg_terminate_backend(\(pid))"
  for try await _ in try await admin.query(terminate, logger: logger) {}
  // Wait until NIO has seen the channel close (the server's FATAL message and the socket's
  // end arrive within milliseconds).
  let deadline = ContinuousClock.now + .seconds(5)
  while !victim.isClosed, ContinuousClock.now < deadline {
    try await Task.sleep(for: .milliseconds(10))
  }
  let outcome = await attempt(victim)
  say("round \(round): connection closed: \(victim.isClosed); query on it: \(outcome)")
  if outcome.hasPrefix("NOT") { hung += 1 }
}
try await admin.close().get()
say(
  hung == 0
    ? "every query on a closed connection ended"
    : "\(hung) of \(rounds) queries on a closed connection never ended (PostgresNIO wrote them with no promise)"
)
exit(hung == 0 ? 0 : 1)
