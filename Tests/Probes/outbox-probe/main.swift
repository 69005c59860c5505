// A child process for the outbox's crash tests, killed with SIGKILL by the test.
//
// Usage:
//   outbox-probe append PATH FIRST
//     Appends messages FIRST, FIRST+1, ... to the outbox at PATH, one at a time, printing
//     `appended N` as soon as each append has returned; never ends.
//   outbox-probe deliver PATH SERVER
//     Delivers the outbox at PATH to a "server" that is the file SERVER: each delivery appends
//     `ID INDEX` to it (and syncs it), prints `applied INDEX`, then never returns, so that the
//     process dies in the middle of delivering.
import Foundation
import OrderlyOutbox

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

struct Step: Codable, Sendable {
  let index: Int
}

/// Written straight to the file descriptor: no buffer stands between the line and the reader.
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let mode = Optional(arguments[1]), ["append", "deliver"].contains(mode)
else {
  FileHandle.standardError.write(
    Data("usage: outbox-probe append PATH FIRST | outbox-probe deliver PATH SERVER\n".utf8)
  )
  exit(64)
}
do {
  let outbox = try Outbox<Step>(path: arguments[2])
  if mode == "append" {
    var index = Int(arguments[3]) ?? 0
    while true {
      try await outbox.append(Step(index: index))
      say("appended \(index)")
      index += 1
    }
  } else {
    let server = arguments[3]
    try outbox.start { envelope in
      let line = "\(envelope.id.uuidString) \(envelope.message.index)\n"
      let handle = open(server, O_WRONLY | O_APPEND | O_CREAT, 0o644)
      _ = line.withCString { write(handle, $0, strlen($0)) }
      fsync(handle)
      close(handle)
      say("applied \(envelope.message.index)")
      while true { try await Task.sleep(for: .seconds(60)) }
    }
    while true { try await Task.sleep(for: .seconds(60)) }
  }
} catch {
  FileHandle.standardError.write(Data("outbox-probe: \(error)\n".utf8))
  exit(1)
}
