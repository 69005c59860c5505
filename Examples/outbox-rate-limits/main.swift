// A tenant's keys under one rate limit, another key with none: each window begins the tenant's
// 2 deliveries, in each key's order; the operator sees the waiting keys and until when.
import Foundation
import OrderlyOperator
import OrderlyOutbox
import OrderlyTestSupport
import Synchronization

/// A call to the partner's API: a record of a tenant, changed.
struct Call: Codable, Sendable {
  let record: String
  let change: Int
}

let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("orderly-outbox-rate-limits-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
guard FileManager.default.changeCurrentDirectoryPath(folder.path) else {
  FileHandle.standardError.write(Data("outbox-rate-limits: cannot work in \(folder.path)\n".utf8))
  exit(1)
}

// A clock moved by hand: a window passes when the example says so. An app passes no clock.
let clock = ManualClock()
let outbox = try Outbox<Call>(path: "outbox.sqlite", clock: clock)
for change in 1...3 {
  try await outbox.append(Call(record: "acme:invoices", change: change), partition: "acme:invoices")
  try await outbox.append(Call(record: "acme:orders", change: change), partition: "acme:orders")
}
try await outbox.append(
  contentsOf: [Call(record: "solo", change: 1), Call(record: "solo", change: 2)],
  partition: "solo"
)
print("appended 3 changes to each of acme:invoices and acme:orders, 2 to solo")

// course: the limit
var options = OutboxDeliveryOptions(pollInterval: .milliseconds(50))
options.rateLimits = [
  // The tenant's keys together: at most 2 deliveries begin in each hour...
  try RateLimit(2, per: .seconds(3_600), keys: .prefix("acme:")),
  // ...and each key of the tenant's at most 1: its records take turns.
  try RateLimit(1, per: .seconds(3_600), keys: .prefix("acme:invoices")),
  try RateLimit(1, per: .seconds(3_600), keys: .prefix("acme:orders")),
]
// course end: the limit
let calls = Mutex<[String]>([])
let events = outbox.events
let delivered = Task {
  var count = 0
  for await event in events {
    if case .delivered = event {
      count += 1
      if count == 8 { return }
    }
  }
}
try outbox.start(
  options,
  deliver: .each { envelope in
    calls.withLock { $0.append("\(envelope.message.record) #\(envelope.message.change)") }
  }
)

/// Waits until `count` calls were made: a state the deliverer reaches, not a time.
func waitForCalls(_ count: Int) async throws {
  while calls.withLock({ $0.count }) < count { try await Task.sleep(for: .milliseconds(10)) }
}

/// The calls made since `since`, the tenant's and solo's apart.
func report(_ window: Int, since: Int) {
  let made = calls.withLock { Array($0.dropFirst(since)) }
  let tenant = made.filter { $0.hasPrefix("acme:") }.count
  let others = made.filter { !$0.hasPrefix("acme:") }
  print(
    "window \(window): \(tenant) of the tenant's calls (limit 2)"
      + (others.isEmpty ? "" : "; \(others.joined(separator: ", ")) at once, no limit counts it")
  )
}

try await waitForCalls(4)
report(1, since: 0)
print("")
print("$ orderly outbox keys --stuck --database outbox.sqlite")
_ = await OutboxCommand.run(["keys", "--stuck", "--database", "outbox.sqlite"]) { print($0) }
print("")
for window in 2...3 {
  let before = calls.withLock { $0.count }
  clock.advance(by: .seconds(3_600))
  try await waitForCalls(before + 2)
  report(window, since: before)
}
await delivered.value
let all = calls.withLock { $0 }
for record in ["acme:invoices", "acme:orders", "solo"] {
  let mine = all.filter { $0.hasPrefix(record + " ") }
  print("\(record): \(mine.joined(separator: ", "))")
}
await outbox.stop()
try await outbox.close()
