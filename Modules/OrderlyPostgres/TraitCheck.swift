// Without the Postgres trait this module is empty (the root package builds it that way by
// default), so the name a user reaches for says what is missing instead of "cannot find".
#if !Postgres
/// Needs Orderly's Postgres trait.
@available(
  *,
  unavailable,
  message:
    "OrderlyPostgres needs Orderly's Postgres trait: add traits: [\"Postgres\"] to the .package line that names Orderly."
)
public final class PostgresOutbox<Message> {}
#endif
