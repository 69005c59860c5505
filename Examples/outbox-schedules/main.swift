// An hourly schedule on an outbox file that two outboxes deliver: each tick appended once, in
// order; paused ticks not appended; the operator's listing with the next ticks.
import Foundation
import OrderlyOperator
import OrderlyOutbox
import OrderlyTestSupport
import Synchronization

/// A job the schedules append.
struct Job: Codable, Sendable {
  let work: String
}

let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("orderly-outbox-schedules-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
guard FileManager.default.changeCurrentDirectoryPath(folder.path) else {
  FileHandle.standardError.write(Data("outbox-schedules: cannot work in \(folder.path)\n".utf8))
  exit(1)
}

// course: the schedule
// A clock moved by hand: an hour passes when the example says so. An app passes no clock.
let clock = ManualClock()
// Two outboxes on one file, as two processes of an app would open it: one delivers (it holds
// the file's deliverer lock), both look at the schedules and race for every tick.
let outbox = try Outbox<Job>(path: "outbox.sqlite", clock: clock)
let other = try Outbox<Job>(path: "outbox.sqlite", clock: clock)

try await outbox.schedules.set(
  OutboxSchedule(
    "hourly-sync",
    .every(.seconds(3_600)),
    partition: "sync",
    message: Job(work: "pull changes")
  )
)
// course end: the schedule
let set = try await outbox.schedules.list()
guard let firstTick = set.first?.nextTick else { exit(1) }
let start = firstTick.addingTimeInterval(-3_600)
print("set hourly-sync: every hour on key sync, first tick at +1 h")

/// A tick's time, as hours after the schedule was set.
@Sendable func hours(_ header: String?) -> String {
  let formatter = ISO8601DateFormatter()
  formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
  guard let header, let tick = formatter.date(from: header) else { return "?" }
  return "+\(Int((tick.timeIntervalSince(start) / 3_600).rounded())) h"
}

let delivered = Mutex<[String]>([])
let ticked = Mutex(0)
for each in [outbox, other] {
  let events = each.events
  Task {
    for await event in events {
      if case .ticked = event { ticked.withLock { $0 += 1 } }
    }
  }
}
try outbox.start(pollInterval: .milliseconds(50)) { envelope in
  let line =
    "\(envelope.partition ?? "-"): \(envelope.message.work) (tick \(hours(envelope.headers["orderly-tick"])))"
  delivered.withLock { $0.append(line) }
}
// The other outbox waits for the deliverer lock; its schedules tick meanwhile.
try other.start(pollInterval: .milliseconds(50)) { _ in }

/// Waits until `count` messages were delivered: a state the deliverer reaches, not a time.
func waitForDelivered(_ count: Int) async throws {
  while delivered.withLock({ $0.count }) < count { try await Task.sleep(for: .milliseconds(10)) }
}

/// Moves the clock an hour on, once both outboxes sleep until the next tick.
func nextHour(expecting count: Int) async throws {
  try await clock.waitForSleepers(2)
  clock.advance(by: .seconds(3_600))
  try await waitForDelivered(count)
}

for hour in 1...3 { try await nextHour(expecting: hour) }
// Each tick's event comes from the outbox that took it.
while ticked.withLock({ $0 }) < 3 { try await Task.sleep(for: .milliseconds(10)) }
for line in delivered.withLock({ $0 }) { print("  delivered \(line)") }
print(
  "3 ticks, \(ticked.withLock { $0 }) appended: the two outboxes raced for each, and each was taken once"
)
print("")

try await outbox.schedules.pause(named: "hourly-sync")
print("paused hourly-sync; two hours pass")
clock.advance(by: .seconds(7_200))
try await outbox.schedules.resume(named: "hourly-sync")
print("resumed: ticks +4 h and +5 h passed while paused and are not appended")
try await nextHour(expecting: 4)
print("  delivered \(delivered.withLock { $0[3] })")
print("")

try await outbox.schedules.set(
  OutboxSchedule(
    "nightly-report",
    .cron("0 2 * * *", timeZone: TimeZone(identifier: "Europe/Paris") ?? .gmt),
    partition: "reports",
    message: Job(work: "build the report"),
    missedTicks: .catchUpOnce
  )
)
print(
  "set nightly-report: 2:00 every night in Paris; a night missed while nothing ran is caught up once"
)
print("")
// The listing reads the real clock, 7 hours behind this run's: JSON, as a script reads it.
print("$ orderly outbox schedules --database outbox.sqlite --format json")
_ = await OutboxCommand.run(["schedules", "--database", "outbox.sqlite", "--format", "json"]) {
  print($0)
}

await other.stop()
await outbox.stop()
try await other.close()
try await outbox.close()
