// Without the Server trait this module is empty (the root package builds it that way by
// default), so the names a user reaches for say what is missing instead of "cannot find".
#if !Server
/// Needs Orderly's Server trait.
@available(
  *,
  unavailable,
  message:
    "OrderlyServer needs Orderly's Server trait: add traits: [\"Server\"] to the .package line that names Orderly."
)
public enum OutboxService {}

/// Needs Orderly's Server trait.
@available(
  *,
  unavailable,
  message:
    "OrderlyServer needs Orderly's Server trait: add traits: [\"Server\"] to the .package line that names Orderly."
)
public enum OrderlyMetrics {}
#endif
