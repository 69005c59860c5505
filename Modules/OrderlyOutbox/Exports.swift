// The outbox's vocabulary (Envelope, RetryPolicy, OutboxError, OutboxEvent, DeadLetter,
// Coalescing, DurableOutbox) lives in OrderlyOutboxCore, below every store. Importing
// OrderlyOutbox brings it as before it moved there, so code written for the SQLite outbox keeps
// compiling with one import.
@_exported public import OrderlyOutboxCore
