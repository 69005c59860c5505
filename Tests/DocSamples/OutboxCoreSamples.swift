// The code the OrderlyOutboxCore documentation shows, compiled by `swift build` (with no trait:
// the module needs none); docs-gen copies each sample into its `orderly:sample` region.
// sample: outbox-core-fence-relay, outbox-core-fence-receiver, outbox-core-schedule
import Foundation
// end sample
// sample: outbox-core-any-store, outbox-core-audit-on, outbox-core-fence-relay, outbox-core-fence-receiver, outbox-core-unique-key, outbox-core-schedule, outbox-core-rate-limits, outbox-core-fair-shares
import OrderlyOutboxCore
// end sample

/// A change the core samples record.
struct NoteEdit: Codable, Sendable {
  var noteID: Int
  var text: String
}

// sample: outbox-core-any-store
/// Records an edit, whichever store the app chose.
func record(_ edit: NoteEdit, in outbox: some DurableOutbox<NoteEdit>) async throws {
  try await outbox.append(edit, partition: "note-\(edit.noteID)")
}
// end sample

// sample: outbox-core-audit-on
/// Starts delivery with the audit trail on, kept 3 days, whichever store the app chose.
func startAudited<O: DurableOutbox<NoteEdit>>(
  _ outbox: O,
  options: O.Options,
  send: @escaping @Sendable (Envelope<NoteEdit>) async throws -> Void
) throws {
  var options = options
  options.audit = OutboxAuditOptions(isOn: true, retention: .seconds(3 * 24 * 3600))
  try outbox.start(options, deliver: .each(send))
}
// end sample

// sample: outbox-core-fence-relay
/// A receiver's answer other than success: the outbox tries the message again.
struct NotAccepted: Error {
  var status: Int
}

/// Relays one delivery over HTTP, with its key, fence and id in the fence headers.
///
/// `post` is the app's HTTP client (URLSession, AsyncHTTPClient, ...).
func relay(
  _ envelope: Envelope<NoteEdit>,
  post: (_ body: Data, _ headers: [String: String]) async throws -> Int
) async throws {
  var headers = envelope.fenceHeaders
  headers["Content-Type"] = "application/json"
  let status = try await post(try JSONEncoder().encode(envelope.message), headers)
  guard status == 200 else { throw NotAccepted(status: status) }
}
// end sample

/// Where the receiving service keeps notes.
struct NoteStore: Sendable {
  func save(_ edit: NoteEdit) async throws {}
}

// sample: outbox-core-fence-receiver
/// The receiving service's endpoint: applies each message once, and refuses a delivery from a
/// worker whose lease has moved on.
struct EditsEndpoint: Sendable {
  let gate = FenceGate()
  let notes: NoteStore

  /// Handles one request; returns the status to answer with.
  func receive(headers: [String: String], body: Data) async throws -> Int {
    let admission = try await gate.apply(headers: headers) {
      try await notes.save(try JSONDecoder().decode(NoteEdit.self, from: body))
    }
    return admission.statusCode
  }
}
// end sample

// sample: outbox-core-unique-key
/// Queues a charge for an invoice once, however often the app is asked to.
func charge(_ edit: NoteEdit, in outbox: some DurableOutbox<NoteEdit>) async throws -> UUID {
  let result = try await outbox.append(
    edit,
    uniqueKey: "charge-note-\(edit.noteID)",
    partition: "note-\(edit.noteID)"
  )
  switch result {
  case .appended(let id): print("queued \(id)")
  case .duplicate(let id): print("already queued as \(id); nothing stored")
  }
  return result.id
}
// end sample

// sample: outbox-core-schedule
/// Keeps the nightly backup and the hourly sync going, whichever store the app chose.
func scheduleUpkeep(in outbox: some DurableOutbox<NoteEdit>) async throws {
  let paris = TimeZone(identifier: "Europe/Paris") ?? .gmt
  try await outbox.schedules.set(
    OutboxSchedule(
      "nightly-backup",
      .cron("30 2 * * *", timeZone: paris),
      partition: "backups",
      message: NoteEdit(noteID: 0, text: "back up every note"),
      missedTicks: .catchUpOnce
    )
  )
  try await outbox.schedules.set(
    OutboxSchedule(
      "hourly-sync",
      .every(.seconds(3_600)),
      partition: "sync",
      message: NoteEdit(noteID: 0, text: "pull changes")
    )
  )
}
// end sample

// sample: outbox-core-rate-limits
/// Starts delivery with a limit per customer and one for a tenant's keys together.
func startLimited<O: DurableOutbox<NoteEdit>>(
  _ outbox: O,
  options: O.Options,
  send: @escaping @Sendable (Envelope<NoteEdit>) async throws -> Void
) throws {
  var options = options
  options.rateLimits = [
    try RateLimit(50, per: .seconds(1), keys: .each),
    try RateLimit(1_000, per: .seconds(60), keys: .prefix("tenant-acme:")),
  ]
  try outbox.start(options, deliver: .each(send))
}
// end sample

// sample: outbox-core-fair-shares
/// Starts delivery with the slots shared by tenant: acme's keys get three deliveries for each
/// one of tiny's, whatever their numbers of keys.
func startShared<O: DurableOutbox<NoteEdit>>(
  _ outbox: O,
  options: O.Options,
  send: @escaping @Sendable (Envelope<NoteEdit>) async throws -> Void
) throws {
  var options = options
  options.fairShares = try FairShares(
    [
      FairShares.Group(prefix: "tenant-acme:", weight: 3),
      FairShares.Group(prefix: "tenant-tiny:", weight: 1),
    ],
    otherKeys: 1
  )
  try outbox.start(options, deliver: .each(send))
}
// end sample
