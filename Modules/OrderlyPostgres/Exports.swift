// What importing OrderlyPostgres brings: the outbox vocabulary of OrderlyOutboxCore.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
// The outbox's vocabulary (Envelope, RetryPolicy, OutboxError, OutboxEvent, DeadLetter,
// Coalescing, DurableOutbox) lives in OrderlyOutboxCore, below every store: a worker on
// PostgreSQL imports this module alone, and builds no SQLite.
@_exported public import OrderlyOutboxCore
#endif
