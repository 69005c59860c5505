import BuiltProducts
import Foundation
import GRDB
import OrderlyCore
import OrderlyOutbox
import OrderlyTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line of the server file the `deliver-all` probes write.
private struct Logged: Equatable {
  let isBegin: Bool
  let pid: Int32
  let index: Int
  let id: String

  init?(_ line: Substring) {
    let words = line.split(separator: " ")
    guard words.count == 4, let pid = Int32(words[1]), let index = Int(words[2]) else {
      return nil
    }
    isBegin = words[0] == "begin"
    self.pid = pid
    self.index = index
    id = String(words[3])
  }
}

/// The server file's lines; a line cut by a kill (the last one) is left out.
private func readLog(_ path: String) -> [Logged] {
  guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
  return text.split(separator: "\n").compactMap(Logged.init)
}

@Suite("Outbox across processes: one deliverer per file, syncs counted", .timeLimit(.minutes(3)))
struct OutboxProcessTests {
  @Test("each append syncs the WAL to disk: 100 appends in a process make 100 syncs or more")
  func appendsAreSynced() async throws {
    let strace = "/usr/bin/strace"
    guard FileManager.default.isExecutableFile(atPath: strace) else {
      let inCI = ProcessInfo.processInfo.environment["CI"] == "true"
      #expect(!inCI, "strace is missing: .ci/run installs it (apt-get install strace)")
      print("skipped: install strace (apt-get install strace) to count the outbox's syncs")
      return
    }
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let trace = folder.path("trace.txt")
    let ended = try await BuiltProducts.offThePool {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: strace)
      process.arguments = [
        "-f", "-y", "-e", "trace=fsync,fdatasync", "-o", trace,
        BuiltProducts.url(of: "outbox-probe").path, "append-count", path, "100",
      ]
      process.standardOutput = FileHandle.nullDevice
      process.standardError = FileHandle.nullDevice
      try process.run()
      process.waitUntilExit()
      return process.terminationStatus
    }
    #expect(ended == 0)
    let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
    // `-y` names the file each sync was for: `fdatasync(5</…/outbox.sqlite-wal>) = 0`.
    let walSyncs = lines.filter { $0.contains("outbox.sqlite-wal>") }.count
    #expect(walSyncs >= 100, "WAL syncs: \(walSyncs); synchronous = FULL syncs every commit")
  }

  @Test("a second deliverer is refused when asked not to wait, and takes over once the first dies")
  func secondDelivererWaitsOrFails() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let server = folder.path("server.log")
    let outbox = try Outbox<Step>(path: path)
    try await outbox.append(contentsOf: (0..<5).map(Step.init(index:)))
    try await outbox.close()
    try await BuiltProducts.offThePool {
      let first = try BuiltProducts.Running("outbox-probe", arguments: ["deliver", path, server])
      #expect(first.readLines(1) == ["applied 0"])
      // The first holds the file: a second that must not wait says so and exits.
      let refused = try BuiltProducts.run("outbox-probe", arguments: ["deliver-or-fail", path])
      #expect(refused.status == 3)
      #expect(refused.stderr.contains("another outbox"), "\(refused.stderr)")
      #expect(refused.stderr.contains("is delivering"))
      // A second that waits delivers nothing while the first lives...
      let second = try BuiltProducts.Running(
        "outbox-probe",
        arguments: ["deliver-all", path, server]
      )
      usleep(300_000)
      #expect(readLog(server).isEmpty)
      // ...and everything, from the head, once the first is killed.
      first.send(SIGKILL)
      _ = first.finish()
      #expect(second.readLines(5) == (0..<5).map { "applied \($0)" })
      second.send(SIGKILL)
      _ = second.finish()
    }
  }

  @Test(
    "several deliverer processes with SIGKILLs: one at a time, in order, every message at least once",
    arguments: [2, 4]
  )
  func deliverersWithKills(processes: Int) async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let server = folder.path("server.log")
    let count = 300
    let outbox = try Outbox<Step>(path: path)
    try await outbox.append(contentsOf: (0..<count).map(Step.init(index:)))
    try await outbox.close()

    // Deliveries pass a gate the test moves (`SERVER.allow`): a deliverer that began message N
    // waits there until N is allowed. So each kill lands at a known point, with a delivery in
    // the middle, however fast or slow the machine runs.
    let allow = server + ".allow"
    @Sendable func setAllowed(_ index: Int) throws {
      try Data("\(index)\n".utf8).write(to: URL(fileURLWithPath: allow), options: .atomic)
    }
    try setAllowed(0)
    try await BuiltProducts.offThePool {
      var generator = SeededGenerator(seed: UInt64(processes))
      var running = try (0..<processes).map { _ in
        try BuiltProducts.Running("outbox-probe", arguments: ["deliver-all", path, server])
      }
      let deadline = Date().addingTimeInterval(120)
      func waitFor(_ done: ([Logged]) -> Bool) {
        while Date() < deadline, !done(readLog(server)) { usleep(10_000) }
      }
      for kill in 1...8 {
        let gate = kill * count / 9
        try setAllowed(gate)
        // Every message before the gate delivered, and the one at the gate begun.
        waitFor { log in
          Set(log.filter { !$0.isBegin }.map(\.index)).count >= gate
            && log.contains { $0.isBegin && $0.index == gate }
        }
        // Kill one at random (the deliverer, mid-delivery, or a waiting one); start another.
        let victim = Int.random(in: 0..<running.count, using: &generator)
        running[victim].send(SIGKILL)
        _ = running[victim].finish()
        running[victim] = try BuiltProducts.Running(
          "outbox-probe",
          arguments: ["deliver-all", path, server]
        )
      }
      try setAllowed(count)
      waitFor { log in Set(log.filter { !$0.isBegin }.map(\.index)).count == count }
      for probe in running {
        probe.send(SIGKILL)
        _ = probe.finish()
      }
      #expect(Date() < deadline, "the deliverers did not finish within 120 s")
    }

    let log = readLog(server)
    // Every message delivered at least once.
    #expect(Set(log.filter { !$0.isBegin }.map(\.index)) == Set(0..<count))
    // In order: deliveries begin in index order; a message begun again (its deliverer was
    // killed) is the one begun last.
    let begins = log.filter(\.isBegin).map(\.index)
    #expect(zip(begins, begins.dropFirst()).allSatisfy { $0 <= $1 && $1 <= $0 + 1 })
    // One process at a time: while a delivery is open (begun, not ended), no other process
    // begins one, unless the open one's process never writes again (it was killed).
    var open: Logged?
    for (position, line) in log.enumerated() {
      if line.isBegin {
        if let previous = open {
          let wroteAgain = log[(position + 1)...].contains { $0.pid == previous.pid }
          #expect(!wroteAgain, "\(line.pid) began #\(line.index) while \(previous.pid) ran")
          // A killed delivery is delivered again first.
          #expect(line.index == previous.index)
        }
        open = line
      } else {
        #expect(open?.pid == line.pid && open?.index == line.index)
        open = nil
      }
    }
    // The identifier is stable across deliverers.
    let ids = Dictionary(grouping: log, by: \.index).mapValues { Set($0.map(\.id)) }
    #expect(ids.values.allSatisfy { $0.count == 1 })
  }

  @Test(
    "a running deliverer sees another process's appends, and a waiter there sees them delivered"
  )
  func appendsFromAnotherProcess() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let server = folder.path("server.log")
    // Created first, so that the deliverer and this process open the same file.
    let outbox = try Outbox<Step>(path: path)
    let deliverer = try BuiltProducts.Running(
      "outbox-probe",
      arguments: ["deliver-all", path, server]
    )
    try await outbox.append(contentsOf: (0..<50).map(Step.init(index:)))
    // This outbox does not deliver; it learns from the file that the other process did.
    try await outbox.waitUntilDelivered()
    #expect(outbox.pendingCount == 0)
    let ends = readLog(server).filter { !$0.isBegin }.map(\.index)
    #expect(ends == Array(0..<50))
    deliverer.send(SIGKILL)
    _ = await deliverer.finish()
    try await outbox.close()
  }
}
