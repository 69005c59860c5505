// Built with the Postgres trait only; see Package.swift.
// Linux only (Glibc's sockets): the PostgreSQL tests run on Linux, in .ci/run.
#if Postgres && canImport(Glibc)
import Foundation
import Glibc
import Synchronization

/// A switch between a client and the test server: a TCP relay on a port of its own that can
/// make the server go away (every connection cut, new ones refused) and come back.
///
/// Clients that connect to ``url`` instead of the server's see exactly what they would see if
/// the server went down and started again; the server itself, and every other test using it,
/// never notices. Blocking sockets, one thread per direction of each connection: for tests.
final class ServerSwitch: Sendable {
  /// The server's URL with this relay's port.
  let url: String
  private let port: UInt16
  private let upstreamPort: UInt16
  private let state = Mutex<State>(State())

  private struct State {
    var listener: Int32 = -1
    /// Every relayed connection, by its client side: its server side, and how many of its two
    /// pumps still run (the last one closes both sockets).
    var connections: [Int32: (server: Int32, pumps: Int)] = [:]
    var generation = 0
  }

  /// A relay to the server `serverURL` names (on 127.0.0.1), switched on.
  init(serverURL: String) throws {
    guard var parts = URLComponents(string: serverURL), let upstream = parts.port else {
      throw SwitchError(description: "no port in \(serverURL)")
    }
    upstreamPort = UInt16(upstream)
    let (listener, port) = try Self.openListener(on: 0)
    self.port = port
    parts.host = "127.0.0.1"
    parts.port = Int(port)
    guard let url = parts.string else { throw SwitchError(description: "bad URL \(serverURL)") }
    self.url = url
    start(listener)
  }

  /// Cuts every connection and refuses new ones, as a server that went away.
  func down() {
    let (listener, connections) = state.withLock { state in
      defer {
        state.listener = -1
        state.generation += 1
      }
      return (state.listener, state.connections)
    }
    if listener >= 0 {
      // Wakes the accepting thread, which then ends.
      shutdown(listener, Int32(SHUT_RDWR))
      close(listener)
    }
    // Wakes both pumps of each connection, which then close it.
    for (client, connection) in connections {
      shutdown(client, Int32(SHUT_RDWR))
      shutdown(connection.server, Int32(SHUT_RDWR))
    }
  }

  /// Accepts connections again, on the same port, as a server that came back.
  func up() throws {
    let (listener, _) = try Self.openListener(on: port)
    start(listener)
  }

  private func start(_ listener: Int32) {
    let generation = state.withLock { state in
      state.listener = listener
      return state.generation
    }
    Thread.detachNewThread { [self] in
      while true {
        let client = accept(listener, nil, nil)
        if client < 0 { return }
        guard let server = try? Self.dial(upstreamPort) else {
          close(client)
          continue
        }
        let live = state.withLock { state in
          guard state.generation == generation else { return false }
          state.connections[client] = (server, 2)
          return true
        }
        guard live else {
          close(client)
          close(server)
          return
        }
        pump(from: client, to: server, connection: client)
        pump(from: server, to: client, connection: client)
      }
    }
  }

  /// Copies bytes one way until either side closes, then closes both.
  private func pump(from source: Int32, to destination: Int32, connection client: Int32) {
    Thread.detachNewThread { [self] in
      var buffer = [UInt8](repeating: 0, count: 65_536)
      loop: while true {
        let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        var sent = 0
        while sent < count {
          let wrote = buffer.withUnsafeBytes {
            send(destination, $0.baseAddress.map { $0 + sent }, count - sent, Int32(MSG_NOSIGNAL))
          }
          if wrote <= 0 { break loop }
          sent += wrote
        }
      }
      shutdown(source, Int32(SHUT_RDWR))
      shutdown(destination, Int32(SHUT_RDWR))
      let last = state.withLock { state in
        guard let connection = state.connections[client] else { return false }
        if connection.pumps > 1 {
          state.connections[client]?.pumps = connection.pumps - 1
          return false
        }
        state.connections[client] = nil
        return true
      }
      if last {
        close(source)
        close(destination)
      }
    }
  }

  private static func address(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
  }

  private static func openListener(on port: UInt16) throws -> (Int32, UInt16) {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw SwitchError(description: "socket: errno \(errno)") }
    var yes: Int32 = 1
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = Self.address(port: port)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0, Glibc.listen(socket, 64) == 0 else {
      close(socket)
      throw SwitchError(description: "cannot listen on port \(port): errno \(errno)")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
    }
    return (socket, UInt16(bigEndian: address.sin_port))
  }

  private static func dial(_ port: UInt16) throws -> Int32 {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw SwitchError(description: "socket: errno \(errno)") }
    var address = Self.address(port: port)
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else {
      close(socket)
      throw SwitchError(description: "cannot reach the server on port \(port): errno \(errno)")
    }
    return socket
  }
}

struct SwitchError: Error, CustomStringConvertible {
  let description: String
}
#endif
