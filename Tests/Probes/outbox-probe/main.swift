// A child process for the outbox's crash and multi-process tests, killed with SIGKILL by the
// test (or ending by itself where said).
//
// Usage:
//   outbox-probe append PATH FIRST
//     Appends messages FIRST, FIRST+1, ... to the outbox at PATH, one at a time, printing
//     `appended N` as soon as each append has returned; never ends.
//   outbox-probe append-count PATH COUNT
//     Appends messages 0..<COUNT one at a time, closes the outbox and exits 0 (the test counts
//     the syncs it makes).
//   outbox-probe deliver PATH SERVER
//     Delivers the outbox at PATH to a "server" that is the file SERVER: each delivery appends
//     `ID INDEX` to it (and syncs it), prints `applied INDEX`, then never returns, so that the
//     process dies in the middle of delivering.
//   outbox-probe deliver-all PATH SERVER
//     Delivers everything, as one of several processes sharing the file: each delivery appends
//     `begin PID INDEX ID`, waits while INDEX is not below the number in SERVER.allow (if that
//     file exists: the test's gate), then appends `end PID INDEX ID` (each line synced), and
//     prints `applied INDEX`. Polls every 50 ms; waits for the deliverer lock; never ends.
//   outbox-probe deliver-or-fail PATH
//     Starts delivery with `whenDeliveredElsewhere: .fail`: prints `delivering` and never ends,
//     or prints the error and exits 3.
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

/// Appends a line to the server file and syncs it.
func log(_ line: String, to server: String) {
  let handle = open(server, O_WRONLY | O_APPEND | O_CREAT, 0o644)
  _ = (line + "\n").withCString { write(handle, $0, strlen($0)) }
  fsync(handle)
  close(handle)
}

/// The first index not allowed through the test's gate file, or every index without one.
func allowed(_ path: String) -> Int {
  guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return .max }
  return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? .max
}

let modes = ["append", "append-count", "deliver", "deliver-all", "deliver-or-fail"]
let arguments = CommandLine.arguments
guard arguments.count >= 3, modes.contains(arguments[1]),
  arguments.count == (arguments[1] == "deliver-or-fail" ? 3 : 4)
else {
  FileHandle.standardError.write(
    Data(
      ("usage: outbox-probe append PATH FIRST | append-count PATH COUNT | deliver PATH SERVER"
        + " | deliver-all PATH SERVER | deliver-or-fail PATH\n").utf8
    )
  )
  exit(64)
}
let mode = arguments[1]
do {
  let outbox = try Outbox<Step>(path: arguments[2])
  switch mode {
  case "append":
    var index = Int(arguments[3]) ?? 0
    while true {
      try await outbox.append(Step(index: index))
      say("appended \(index)")
      index += 1
    }
  case "append-count":
    for index in 0..<(Int(arguments[3]) ?? 0) { try await outbox.append(Step(index: index)) }
    try await outbox.close()
    exit(0)
  case "deliver":
    let server = arguments[3]
    try outbox.start { envelope in
      log("\(envelope.id.uuidString) \(envelope.message.index)", to: server)
      say("applied \(envelope.message.index)")
      while true { try await Task.sleep(for: .seconds(60)) }
    }
  case "deliver-all":
    let server = arguments[3]
    let pid = getpid()
    try outbox.start(pollInterval: .milliseconds(50)) { envelope in
      let index = envelope.message.index
      log("begin \(pid) \(index) \(envelope.id.uuidString)", to: server)
      // The test's gate: wait while this index is not allowed yet.
      while index >= allowed(server + ".allow") { usleep(1_000) }
      log("end \(pid) \(index) \(envelope.id.uuidString)", to: server)
      say("applied \(index)")
    }
  default:
    try outbox.start(whenDeliveredElsewhere: .fail) { _ in }
    say("delivering")
  }
  while true { try await Task.sleep(for: .seconds(60)) }
} catch {
  FileHandle.standardError.write(Data("outbox-probe: \(error)\n".utf8))
  exit(mode == "deliver-or-fail" ? 3 : 1)
}
