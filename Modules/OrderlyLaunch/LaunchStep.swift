/// One step an app runs at launch and on every return to the foreground, such as an upgrade
/// nudge, a passcode prompt or "what's new".
///
/// A minimal step is two lines:
///
/// ```swift
/// struct RemoveLaunchScreen: LaunchStep {
///   func run() async { launchScreen.remove() }
/// }
/// ```
///
/// Everything else has a default: ``name`` is the type's name, ``id`` is the name (so a second
/// instance of the same step type counts as a duplicate), ``shouldRun()`` returns `true`, and
/// ``timeout`` is `nil`.
@MainActor
public protocol LaunchStep: Sendable {
  /// A name for history and events; defaults to the type's name.
  var name: String { get }
  /// What makes two steps duplicates of each other; defaults to ``name``.
  var id: String { get }
  /// How long the step may run before it is cancelled and the next one starts; `nil` (the
  /// default) for no limit.
  var timeout: Duration? { get }
  /// Asked just before the step would start, so it sees the app's state at that moment, not
  /// when it was enqueued. Return `false` to skip it; defaults to `true`.
  func shouldRun() async -> Bool
  /// The step's work: present something and wait until the user is done with it. It should
  /// return soon after its task is cancelled.
  func run() async
}

extension LaunchStep {
  /// The type's name, such as `PasscodeLaunchStep`.
  public var name: String { String(describing: Self.self) }
  /// The step's name.
  public var id: String { name }
  /// No time limit.
  public var timeout: Duration? { nil }
  /// Always run.
  public func shouldRun() async -> Bool { true }
}
