// A shop's outbox: a retried request appends one charge (a unique key), and a customer whose
// charges keep failing is quarantined by itself, while the others go on, until the operator
// resumes her key.
import Foundation
import OrderlyOperator
import OrderlyOutbox
import Synchronization

/// A charge of an order, as the shop sends it to its payment service.
struct Charge: Codable, Sendable {
  let order: Int
  let customer: String
  let cents: Int
}

/// The payment service: it refuses carol's charges while her account is closed.
final class Payments: Sendable {
  struct AccountClosed: Error, CustomStringConvertible {
    let customer: String
    var description: String { "503: \(customer)'s account is closed for maintenance" }
  }

  private let state = Mutex<(carolOpen: Bool, charged: [String])>((false, []))

  func charge(_ charge: Charge) throws {
    try state.withLock { state in
      if charge.customer == "carol", !state.carolOpen { throw AccountClosed(customer: "carol") }
      state.charged.append("\(charge.customer): order \(charge.order), \(charge.cents) cents")
    }
  }

  func openCarol() { state.withLock { $0.carolOpen = true } }

  var charged: [String] { state.withLock { $0.charged } }
}

/// Runs `orderly outbox ARGUMENTS` as the operator types it, after a prompt line.
func run(_ arguments: String) async {
  print("$ orderly outbox \(arguments)")
  let status = await OutboxCommand.run(arguments.split(separator: " ").map(String.init)) {
    print($0)
  }
  print(status == 0 ? "" : "(exit status \(status))\n")
}

/// Waits until `condition` holds: a state the deliverer reaches, not a time.
func waitUntil(_ condition: () async throws -> Bool) async throws {
  while try await !condition() { try await Task.sleep(for: .milliseconds(10)) }
}

let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("orderly-outbox-poison-key-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
guard FileManager.default.changeCurrentDirectoryPath(folder.path) else {
  FileHandle.standardError.write(Data("outbox-poison-key: cannot work in \(folder.path)\n".utf8))
  exit(1)
}

let payments = Payments()
let outbox = try Outbox<Charge>(path: "outbox.sqlite")

// A checkout appends its charge with the order's unique key. The client did not hear back and
// sent the request again: the second append stores nothing, and names the charge queued.
func checkout(_ charge: Charge) async throws -> UniqueAppend {
  try await outbox.append(
    charge,
    uniqueKey: "charge-order-\(charge.order)",
    partition: charge.customer
  )
}
let first = try await checkout(Charge(order: 1, customer: "alice", cents: 1_250))
let retried = try await checkout(Charge(order: 1, customer: "alice", cents: 1_250))
print("checkout of order 1: \(first.wasAppended ? "appended" : "not appended")")
print(
  "the same request again: "
    + (retried == .duplicate(of: first.id)
      ? "a duplicate of the first append; nothing stored" : "appended again (wrong)")
)
for charge in [
  Charge(order: 2, customer: "carol", cents: 4_000),
  Charge(order: 3, customer: "bob", cents: 990),
  Charge(order: 4, customer: "carol", cents: 150),
  Charge(order: 5, customer: "alice", cents: 2_500),
  Charge(order: 6, customer: "bob", cents: 75),
] {
  _ = try await checkout(charge)
}
print("pending: \(outbox.pendingCount) charges for 3 customers\n")

// Delivery with a quarantine policy: 3 failed attempts at a key's first message set the key
// aside by itself. Retries are quick here, to keep the run short.
var options = OutboxDeliveryOptions(
  retry: try RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(20)),
  pollInterval: .milliseconds(50)
)
options.quarantine = QuarantinePolicy(afterFailedAttempts: 3)
let events = outbox.events
let quarantined = Task {
  for await event in events {
    if case .quarantined(_, _, let customer, let reason) = event {
      return "quarantined \(customer ?? "(default)"): \(reason)"
    }
  }
  return "no quarantine"
}
try outbox.start(options, deliver: .each { envelope in try payments.charge(envelope.message) })
print("event: \(await quarantined.value)")
try await waitUntil { payments.charged.count == 4 }
// Keys are delivered side by side: shown customer by customer.
print("The payment service charged, while carol's key was set aside:")
for line in payments.charged.sorted(by: { $0.prefix(5) < $1.prefix(5) }) { print("  \(line)") }
print("")

// The operator: carol's key is listed first, with why.
await run("keys --database outbox.sqlite")

// Carol's account is open again; the operator lets her key go, from the same charge.
payments.openCarol()
await run("resume carol --database outbox.sqlite")
try await waitUntil { try await outbox.counts().pending == 0 }
print("Carol's charges, delivered in order once resumed:")
for line in payments.charged.dropFirst(4) { print("  \(line)") }
print("")
await run("keys --database outbox.sqlite")
await outbox.stop()
try await outbox.close()
