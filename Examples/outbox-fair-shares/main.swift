// A tenant with a hundred keys beside one with two, one delivery slot: without groups the keys
// take turns and the small tenant waits behind the big one's hundred; with fair-share groups
// each tenant gets its weight's part of the deliveries, and every key keeps its order.
import Foundation
import OrderlyOperator
import OrderlyOutbox
import Synchronization

/// A change of one of a tenant's records, for the tenant's webhook.
struct Change: Codable, Sendable {
  let record: String
  let number: Int
}

let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("orderly-outbox-fair-shares-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
guard FileManager.default.changeCurrentDirectoryPath(folder.path) else {
  FileHandle.standardError.write(Data("outbox-fair-shares: cannot work in \(folder.path)\n".utf8))
  exit(1)
}

/// Opens an outbox file with the big tenant's 100 keys of 3 changes, appended first, and the
/// small tenant's 2 keys of 60.
func filledOutbox(_ path: String) async throws -> Outbox<Change> {
  let outbox = try Outbox<Change>(path: path)
  for key in 1...100 {
    try await outbox.append(
      contentsOf: (1...3).map { Change(record: "big:\(key)", number: $0) },
      partition: "big:\(key)"
    )
  }
  for key in 1...2 {
    try await outbox.append(
      contentsOf: (1...60).map { Change(record: "small:\(key)", number: $0) },
      partition: "small:\(key)"
    )
  }
  return outbox
}

/// Delivers a filled outbox with one slot and `shares`; returns the records in delivery order,
/// and whether each record's changes came in order.
func deliver(_ path: String, shares: FairShares?) async throws -> (records: [String], ordered: Bool)
{
  let outbox = try await filledOutbox(path)
  let delivered = Mutex<[Change]>([])
  // course: the groups
  var options = OutboxDeliveryOptions(limit: 1)
  options.fairShares = shares
  // course end: the groups
  try outbox.start(
    options,
    deliver: .each { envelope in delivered.withLock { $0.append(envelope.message) } }
  )
  try await outbox.waitUntilDelivered()
  await outbox.stop()
  try await outbox.close()
  let changes = delivered.withLock { $0 }
  var next: [String: Int] = [:]
  var ordered = true
  for change in changes {
    if change.number != next[change.record, default: 1] { ordered = false }
    next[change.record] = change.number + 1
  }
  return (changes.map(\.record), ordered)
}

/// How many of the first 60 deliveries went to each tenant.
func firstSixty(_ records: [String]) -> String {
  let first = records.prefix(60)
  let big = first.count { $0.hasPrefix("big:") }
  return "big: \(big), small: \(first.count - big)"
}

print(
  "appended 3 changes to each of 100 keys of big: (300), then 60 to each of 2 keys of small: (120)"
)
print("one delivery slot; of the first 60 deliveries:")
let plain = try await deliver("plain.sqlite", shares: nil)
print("  without groups:          \(firstSixty(plain.records))")
// course: the weights
let even = try FairShares([
  FairShares.Group(prefix: "big:", weight: 1), FairShares.Group(prefix: "small:", weight: 1),
])
let smallFirst = try FairShares([
  FairShares.Group(prefix: "big:", weight: 1), FairShares.Group(prefix: "small:", weight: 3),
])
// course end: the weights
let evenRun = try await deliver("even.sqlite", shares: even)
print("  big: 1, small: 1:        \(firstSixty(evenRun.records))")
let smallRun = try await deliver("small-first.sqlite", shares: smallFirst)
print("  big: 1, small: 3:        \(firstSixty(smallRun.records))")
let allOrdered = plain.ordered && evenRun.ordered && smallRun.ordered
print("every record's changes in order, in each run: \(allOrdered ? "yes" : "NO")")
print("")
// The operator's view of the groups, before any delivery.
let waiting = try await filledOutbox("waiting.sqlite")
try await waiting.close()
print("$ orderly outbox groups big:=1 small:=3 --database waiting.sqlite")
_ = await OutboxCommand.run(["groups", "big:=1", "small:=3", "--database", "waiting.sqlite"]) {
  print($0)
}
