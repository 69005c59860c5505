import Foundation
public import OrderlyRepository

/// A timeline picture: one row per job, a bar from its start to its end on a shared axis,
/// coloured by outcome, with the verdict as a caption, drawn as an SVG that renders on GitHub.
///
/// The axis is either time (a run's milliseconds) or *steps*: the order events happened in,
/// one step per log line. A picture in steps shows exactly what the order was and is the same
/// for every run that happened in the same order, so the course's pictures never drift.
///
/// ```swift
/// let picture = TimelinePicture(entries: log.entries, caption: "\(log.verdict)")
/// try picture.svg().write(toFile: "timeline.svg", atomically: true, encoding: .utf8)
/// ```
public struct TimelinePicture: Sendable, Equatable {
  /// How a job ended.
  public enum Outcome: String, Sendable, Equatable {
    /// It returned.
    case finished
    /// It threw.
    case failed
    /// It was cancelled, or dropped, before or while it ran.
    case cancelled
    /// It had not ended when the picture was taken.
    case running
    /// An outbox gave it up: it went to the dead letters.
    case deadLettered = "dead letter"
    /// It was not run: it said, when its turn came, that it should not (a launch step).
    case skipped
    /// It ran past its time limit and was stopped.
    case timedOut = "timed out"
    /// A newer job took its place in line before it started (a coalescing queue's
    /// `QueueError.superseded`): it never ran, and nothing cancelled it.
    case replaced
  }

  /// A part of a row whose job was tried more than once: an attempt, or the wait before the next.
  public struct Segment: Sendable, Equatable {
    /// What the part was.
    public enum Kind: String, Sendable, Equatable {
      /// An attempt that failed and will be tried again.
      case failedAttempt = "failed attempt"
      /// The wait before the next attempt (an outbox's backoff).
      case wait = "backoff wait"
      /// The last attempt, which ended as the row's outcome says.
      case lastAttempt
      /// A worker holding the row's key (a fleet's lease): ``Segment/holder`` says who, with
      /// which fence.
      case hold = "held"
      /// The key waiting for a dead holder's lease to run out.
      case leaseWait = "waiting for the lease to run out"
      /// The job waiting in its queue's line, before it started.
      case queued = "waiting in line"
      /// A cancelled job undoing what it did before it ends (a save rolling back).
      case rollback = "rolling back"
      /// A job suspended at an `await`, off its actor, until it resumes (an actor queue's job
      /// awaiting a slow call, while the next job runs on the actor).
      case suspended = "suspended, off the actor"
    }

    /// How a hold ended, when not with the row's last delivery.
    public enum Ending: String, Sendable, Equatable {
      /// Its worker was killed (SIGKILL): the key waits for the lease.
      case killed = "killed (SIGKILL)"
      /// Its worker released the key on a graceful stop (SIGTERM): it moves at once.
      case released = "released on SIGTERM"
    }

    /// Where it starts on the axis.
    public var start: Double
    /// Where it ends on the axis.
    public var end: Double
    /// What it was.
    public var kind: Kind
    /// The step (1 for the log's first event) that begins it, when drawn from a log.
    public var firstStep: Int?
    /// The step that ends it, when drawn from a log.
    public var lastStep: Int?
    /// Who held the key, for a ``Kind/hold``: `A, fence 1`.
    public var holder: String?
    /// How a ``Kind/hold`` ended, when its worker was killed or let the key go.
    public var ending: Ending?

    /// Creates a segment.
    ///
    /// - Parameters:
    ///   - start: Where it starts on the axis.
    ///   - end: Where it ends on the axis.
    ///   - kind: What it was.
    ///   - firstStep: The step that begins it, when drawn from a log.
    ///   - lastStep: The step that ends it, when drawn from a log.
    ///   - holder: Who held the key, for a ``Kind/hold``.
    ///   - ending: How a ``Kind/hold`` ended, when not with a delivery.
    public init(
      start: Double,
      end: Double,
      kind: Kind,
      firstStep: Int? = nil,
      lastStep: Int? = nil,
      holder: String? = nil,
      ending: Ending? = nil
    ) {
      self.start = start
      self.end = end
      self.kind = kind
      self.firstStep = firstStep
      self.lastStep = lastStep
      self.holder = holder
      self.ending = ending
    }

    /// Whether it is an attempt at the job (not a wait, not a hold).
    var isAttempt: Bool { kind == .failedAttempt || kind == .lastAttempt }
  }

  /// One job's bar.
  public struct Row: Sendable, Equatable {
    /// The row's label, as in `3 createNote`.
    public var label: String
    /// Where the bar starts on the axis.
    public var start: Double
    /// Where the bar ends on the axis.
    public var end: Double
    /// How the job ended: the bar's colour.
    public var outcome: Outcome
    /// What went wrong because of the order, in a few words, as in `saw 2 notes, not 3`.
    ///
    /// The call finished, but its answer differs from the in-order run's. Drawn hatched, with
    /// the words beside the bar; `nil` for an answer as in order.
    public var damage: String?
    /// The attempts and waits of a job tried more than once, in order; empty for one bar.
    public var segments: [Segment]
    /// The step (1 for the log's first event) at which the job started, when drawn from a log.
    public var firstStep: Int?
    /// The step at which it ended (the last step for one still running), when drawn from a log.
    public var lastStep: Int?

    /// How many times the job was tried: its failed attempts and its last one.
    ///
    /// A job that ran in parts (suspended in between, or rolling back) was tried once.
    public var attempts: Int {
      segments.count { $0.kind == .failedAttempt }
        + (segments.contains { $0.kind == .lastAttempt } ? 1 : 0)
    }

    /// Creates a row.
    ///
    /// - Parameters:
    ///   - label: The row's label.
    ///   - start: Where the bar starts on the axis.
    ///   - end: Where the bar ends on the axis.
    ///   - outcome: How the job ended.
    ///   - damage: What went wrong because of the order; `nil` for nothing.
    ///   - segments: The attempts and waits of a job tried more than once.
    ///   - firstStep: The step at which the job started, when drawn from a log.
    ///   - lastStep: The step at which it ended, when drawn from a log.
    public init(
      label: String,
      start: Double,
      end: Double,
      outcome: Outcome,
      damage: String? = nil,
      segments: [Segment] = [],
      firstStep: Int? = nil,
      lastStep: Int? = nil
    ) {
      self.label = label
      self.start = start
      self.end = end
      self.outcome = outcome
      self.damage = damage
      self.segments = segments
      self.firstStep = firstStep
      self.lastStep = lastStep
    }
  }

  /// One event of the log a picture was drawn from: a step of its replay.
  public struct Step: Sendable, Equatable {
    /// The log line, without indentation or time stamp.
    public var line: String
    /// Where it happened on the axis.
    public var position: Double
    /// The index of the row it belongs to, or -1 for none.
    public var row: Int

    /// Creates a step.
    ///
    /// - Parameters:
    ///   - line: The log line.
    ///   - position: Where it happened on the axis.
    ///   - row: The index of its row, or -1.
    public init(line: String, position: Double, row: Int) {
      self.line = line
      self.position = position
      self.row = row
    }
  }

  /// The rows, top to bottom.
  public var rows: [Row]
  /// What the axis counts: `ms`, or `step` for the order of events.
  public var unit: String
  /// The line under the picture, usually the verdict.
  public var caption: String
  /// Whether the answers were compared with an in-order run: the caption then says how many
  /// went wrong, or that none did.
  public var answersChecked: Bool
  /// The events the picture was drawn from, in order, when it was drawn from a log
  /// (``init(log:caption:answersChecked:)``); empty otherwise.
  public var steps: [Step] = []

  /// Creates a picture from rows.
  ///
  /// - Parameters:
  ///   - rows: The rows, top to bottom.
  ///   - unit: What the axis counts: `ms`, or `step`.
  ///   - caption: The line under the picture.
  ///   - answersChecked: Whether the rows' answers were compared with an in-order run (their
  ///     ``Row/damage`` set): the caption then counts the wrong ones, or says there are none.
  public init(rows: [Row], unit: String, caption: String, answersChecked: Bool = false) {
    self.rows = rows
    self.unit = unit
    self.caption = caption
    self.answersChecked = answersChecked
  }

  /// A picture in steps of an activity log: each entry is one step.
  ///
  /// - Parameters:
  ///   - entries: The log, in the order written.
  ///   - caption: The line under the picture; the log's verdict if `nil`.
  public init(entries: [ActivityEntry], caption: String? = nil) {
    let lines = entries.map(\.description)
    self.init(
      rows: Self.rows(fromLog: lines),
      unit: "step",
      caption: caption ?? ActivityLog.verdict(of: entries).description
    )
  }

  /// A picture in milliseconds of a scenario run, with its verdict as the caption.
  ///
  /// - Parameter run: The run.
  public init(run: ScenarioRun) {
    let damage = Self.damage(fromConsequences: run.consequences)
    self.init(
      rows: run.spans.map {
        Row(
          label: "\($0.call) \($0.operation)",
          start: $0.startMilliseconds,
          end: $0.endMilliseconds,
          outcome: $0.failed ? .failed : .finished,
          damage: damage[$0.call]
        )
      },
      unit: "ms",
      caption: "\(run.strategy): \(run.verdict)",
      answersChecked: true
    )
  }

  /// The damage of each call, by call number, from consequence sentences such as
  /// `call 4 fetchNotes saw 2 notes; in order it would have seen 3 notes` (as
  /// ``ScenarioRun/consequences`` and the examples print them): `saw 2 notes, not 3 notes`.
  ///
  /// - Parameter sentences: The sentences; others are skipped.
  /// - Returns: A few words per call that answered wrongly.
  public static func damage(fromConsequences sentences: [String]) -> [Int: String] {
    var damage: [Int: String] = [:]
    for sentence in sentences {
      let text = sentence.trimmingCharacters(in: .whitespaces)
      guard text.hasPrefix("call "),
        let saw = text.range(of: " saw "),
        let wanted = text.range(of: "; in order it would have seen "),
        saw.upperBound <= wanted.lowerBound
      else { continue }
      let words = text.dropFirst("call ".count).split(separator: " ")
      guard let number = words.first.flatMap({ Int($0) }) else { continue }
      damage[number] =
        "saw \(text[saw.upperBound..<wanted.lowerBound]), not \(text[wanted.upperBound...])"
    }
    return damage
  }

  /// Rows from log lines such as an example prints: `start 3 createNote`,
  /// `finish 3 createNote: note 3: todo`, `error 5 updateNote: …`, `cancelled 2 fetchNote`,
  /// a `TaskStore`'s events, `started save #1` and `ended save #1: cancelled`, or an outbox's,
  /// `delivering #1`, `delivered #1` and `dead letter #3: …`.
  ///
  /// A line is an event when its first word is one of `start`, `started`, `delivering`,
  /// `finish`, `finished`, `delivered`, `error`, `failed`, `dead`, `cancelled`, `dropped` or
  /// `ended` (whose outcome follows the colon), and a later word before any colon is a number
  /// (`3`, `#3`, `task 3`). A fleet's keys add `took 1 alice: A, fence 1` (a worker takes the
  /// key: a hold begins, named after the colon), `killed 1 alice: ...` (its worker was killed:
  /// the key waits for the lease) and `released 1 alice: ...` (its worker let it go on
  /// SIGTERM); the row's last `delivered` ends its last hold. `waiting 5 search` puts a job in
  /// its queue's line: its bar begins there, with the wait drawn apart until it starts, or, if
  /// it is dropped before it starts, the wait and a mark of how it ended at its end (`dropped 2 search: replaced by ...` is
  /// drawn as ``Outcome/replaced``, `...: skipped ...` as ``Outcome/skipped``, any other drop as
  /// cancelled). `rolling back save #1` ends what a
  /// cancelled job did and begins its rollback, up to its end. Lines may be
  /// indented; any other line takes no step. A job that started but never ended is drawn as
  /// running to the last step. See ``init(log:caption:answersChecked:)`` for lines that carry
  /// their time.
  ///
  /// - Parameter lines: The printed lines, in order.
  /// - Returns: One row per job that started, ordered by job number.
  public static func rows(fromLog lines: [String]) -> [Row] {
    Log(lines).rows
  }

  /// A picture of log lines (see ``rows(fromLog:)``), on the axis the log allows.
  ///
  /// When every event line starts with its time on the run's clock, as in
  /// `[120 ms] retrying #1 in 0.2 seconds: …` (an example running on an injected clock prints
  /// the same times on every run), the axis is that time, in milliseconds, with ticks. Otherwise
  /// it is the order of events, one step per event line.
  ///
  /// - Parameters:
  ///   - lines: The printed lines, in order.
  ///   - caption: The line under the picture.
  ///   - answersChecked: Whether the rows' answers were compared with an in-order run.
  public init(log lines: [String], caption: String, answersChecked: Bool = false) {
    let log = Log(lines)
    self.init(rows: log.rows, unit: log.unit, caption: caption, answersChecked: answersChecked)
    self.steps = log.steps
  }

  /// A log read into rows and steps.
  private struct Log {
    var rows: [Row] = []
    var steps: [Step] = []
    var unit = "step"

    init(_ lines: [String]) {
      let events = lines.compactMap(Event.init)
      let timed = !events.isEmpty && events.allSatisfy { $0.time != nil }
      unit = timed ? "ms" : "step"
      // On the step axis an event is a step wide; on a clock it is an instant.
      let pad = timed ? 0 : 0.5
      var starts: [Int: (label: String, at: Double, step: Int)] = [:]
      var ends: [Int: (at: Double, outcome: Outcome, step: Int)] = [:]
      // A job tried more than once (an outbox's `retrying #3 ...`): its attempts and waits.
      var segments: [Int: [Segment]] = [:]
      var open: [Int: (at: Double, step: Int, waiting: Bool)] = [:]
      // A key's holder (a fleet's lease), and a key waiting for a dead holder's lease.
      var holds: [Int: (at: Double, step: Int, holder: String)] = [:]
      var leaseWaits: [Int: (at: Double, step: Int)] = [:]
      // A job waiting in its queue's line (`waiting 5 ...`) until it starts or is dropped.
      var queued: [Int: (at: Double, step: Int)] = [:]
      // A cancelled job rolling back (`rolling back save #1`) until it ends.
      var rollbacks: [Int: (at: Double, step: Int)] = [:]
      // A job suspended at an `await` (`suspended 1 slow: ...`) until it resumes.
      var suspensions: [Int: (at: Double, step: Int)] = [:]
      var last = (at: 0.0, step: 0)
      func endHold(_ number: Int, at: Double, step: Int, ending: Segment.Ending?) {
        guard let hold = holds.removeValue(forKey: number) else { return }
        segments[number, default: []].append(
          Segment(
            start: hold.at - pad,
            end: at + pad,
            kind: .hold,
            firstStep: hold.step,
            lastStep: step,
            holder: hold.holder,
            ending: ending
          )
        )
      }
      for (index, event) in events.enumerated() {
        let step = index + 1
        let at = timed ? event.time ?? 0 : Double(step)
        last = (at, step)
        steps.append(Step(line: event.text, position: at, row: 0))
        if let change = event.hold {
          switch change {
          case .took:
            if starts[event.number] == nil {
              let label = event.label.isEmpty ? "\(event.number)" : "\(event.number) \(event.label)"
              starts[event.number] = (label, at, step)
            }
            if let wait = leaseWaits.removeValue(forKey: event.number) {
              segments[event.number, default: []].append(
                Segment(
                  start: wait.at,
                  end: at - pad,
                  kind: .leaseWait,
                  firstStep: wait.step,
                  lastStep: step
                )
              )
            }
            endHold(event.number, at: at, step: step, ending: nil)
            holds[event.number] = (at, step, event.detail)
          case .killed:
            endHold(event.number, at: at, step: step, ending: .killed)
            leaseWaits[event.number] = (at, step)
          case .released:
            endHold(event.number, at: at, step: step, ending: .released)
          }
          continue
        }
        if event.outcome != nil, holds[event.number] != nil {
          endHold(event.number, at: at, step: step, ending: nil)
          ends[event.number] = (at, event.outcome ?? .finished, step)
          continue
        }
        if holds[event.number] != nil || leaseWaits[event.number] != nil {
          // Deliveries inside a hold are the hold's: the picture draws who held the key.
          continue
        }
        if event.isQueued {
          if starts[event.number] == nil {
            let label = event.label.isEmpty ? "\(event.number)" : "\(event.number) \(event.label)"
            starts[event.number] = (label, at, step)
          }
          queued[event.number] = (at, step)
          continue
        }
        if let line = queued.removeValue(forKey: event.number) {
          if event.outcome == nil {
            // It leaves the line and starts: the wait is a part of its bar, the run the next.
            if at - pad > line.at {
              segments[event.number, default: []].append(
                Segment(
                  start: line.at,
                  end: at - pad,
                  kind: .queued,
                  firstStep: line.step,
                  lastStep: step
                )
              )
            }
            open[event.number] = (at, step, false)
            continue
          }
          // Taken out of line before it ran: the time it waited, drawn as a wait (it did no
          // work), then a mark of how it ended.
          ends[event.number] = (at, event.outcome ?? .cancelled, step)
          segments[event.number, default: []] += [
            Segment(
              start: line.at,
              end: at - pad,
              kind: .queued,
              firstStep: line.step,
              lastStep: step
            ),
            Segment(
              start: at - pad,
              end: at + pad,
              kind: .lastAttempt,
              firstStep: step,
              lastStep: step
            ),
          ]
          continue
        }
        if event.isSuspension || event.isRollback {
          // What it ran until it suspended (or was cancelled) is one part of its bar; the
          // suspension (or the rollback) the next.
          if let attempt = open.removeValue(forKey: event.number) {
            segments[event.number, default: []].append(
              Segment(
                start: attempt.at - pad,
                end: at,
                kind: .lastAttempt,
                firstStep: attempt.step,
                lastStep: step
              )
            )
          }
          if event.isSuspension {
            suspensions[event.number] = (at, step)
          } else {
            rollbacks[event.number] = (at, step)
          }
          continue
        }
        if let rollback = rollbacks[event.number], let outcome = event.outcome {
          rollbacks[event.number] = nil
          ends[event.number] = (at, outcome, step)
          segments[event.number, default: []].append(
            Segment(
              start: rollback.at,
              end: at + pad,
              kind: .rollback,
              firstStep: rollback.step,
              lastStep: step
            )
          )
          continue
        }
        if event.isRetry {
          if let attempt = open[event.number], !attempt.waiting {
            segments[event.number, default: []].append(
              Segment(
                start: attempt.at - pad,
                end: at,
                kind: .failedAttempt,
                firstStep: attempt.step,
                lastStep: step
              )
            )
          }
          open[event.number] = (at, step, true)
        } else if let outcome = event.outcome {
          ends[event.number] = (at, outcome, step)
          if let attempt = open.removeValue(forKey: event.number), segments[event.number] != nil {
            segments[event.number, default: []].append(
              Segment(
                start: attempt.at - pad,
                end: at + pad,
                kind: .lastAttempt,
                firstStep: attempt.step,
                lastStep: step
              )
            )
          }
        } else {
          if starts[event.number] == nil {
            let label = event.label.isEmpty ? "\(event.number)" : "\(event.number) \(event.label)"
            starts[event.number] = (label, at, step)
          }
          if let suspension = suspensions.removeValue(forKey: event.number) {
            segments[event.number, default: []].append(
              Segment(
                start: suspension.at,
                end: at,
                kind: .suspended,
                firstStep: suspension.step,
                lastStep: step
              )
            )
          }
          if let wait = open[event.number], wait.waiting {
            segments[event.number, default: []].append(
              Segment(
                start: wait.at,
                end: at - pad,
                kind: .wait,
                firstStep: wait.step,
                lastStep: step
              )
            )
          }
          open[event.number] = (at, step, false)
        }
      }
      let ordered = starts.keys.sorted()
      let rowOf = Dictionary(uniqueKeysWithValues: ordered.enumerated().map { ($1, $0) })
      for index in steps.indices {
        // An event of a job that never started (an end without its start) has no row.
        steps[index].row = rowOf[events[index].number] ?? -1
      }
      rows = ordered.map { number in
        let start = starts[number] ?? ("\(number)", 0, 1)
        let end = ends[number]
        var parts = segments[number] ?? []
        if let hold = holds[number] {
          parts.append(
            Segment(
              start: hold.at - pad,
              end: last.at + pad,
              kind: .hold,
              firstStep: hold.step,
              lastStep: last.step,
              holder: hold.holder
            )
          )
        } else if let wait = leaseWaits[number] {
          parts.append(
            Segment(
              start: wait.at,
              end: last.at + pad,
              kind: .leaseWait,
              firstStep: wait.step,
              lastStep: last.step
            )
          )
        } else if !parts.isEmpty, end == nil, let attempt = open[number] {
          parts.append(
            Segment(
              start: attempt.waiting ? attempt.at : attempt.at - pad,
              end: last.at + pad,
              kind: attempt.waiting ? .wait : .lastAttempt,
              firstStep: attempt.step,
              lastStep: last.step
            )
          )
        }
        return Row(
          label: start.label,
          start: start.at - pad,
          end: (end?.at ?? last.at) + pad,
          outcome: end?.outcome ?? .running,
          segments: parts,
          firstStep: start.step,
          lastStep: end?.step ?? last.step
        )
      }
    }
  }

  /// One parsed log line: a start (no outcome) or an end.
  private struct Event {
    let number: Int
    let label: String
    let outcome: Outcome?
    /// A failed attempt that will be tried again: `retrying #3 in 0.1 seconds: ...`.
    var isRetry = false
    /// A job put in its queue's line, to start later: `waiting 5 search "swift"`.
    var isQueued = false
    /// A cancelled job that rolls back before it ends: `rolling back save #1: ...`.
    var isRollback = false
    /// A job suspended at an `await`, off its actor: `suspended 1 slow: ...`; `resumed 1 slow`
    /// starts its next part.
    var isSuspension = false
    /// A change of a key's holder: `took`, `killed`, `released`.
    var hold: HoldChange?
    /// What follows the colon: a hold's holder.
    var detail = ""

    enum HoldChange { case took, killed, released }
    /// When it happened, in milliseconds, if the line starts with its time: `[120 ms] ...`.
    var time: Double?
    /// The line without its indentation and time stamp.
    let text: String

    init?(_ line: String) {
      var line = line.trimmingCharacters(in: .whitespaces)
      if let (time, rest) = Self.stamp(line) {
        self.time = time
        line = rest
      }
      text = line
      let (head, detail) = Self.split(line)
      self.detail = detail
      let words = head.split(separator: " ")
      guard let kind = words.first?.lowercased() else { return nil }
      switch kind {
      case "took":
        outcome = nil
        hold = .took
      case "killed":
        outcome = nil
        hold = .killed
      case "released":
        outcome = nil
        hold = .released
      case "waiting":
        outcome = nil
        isQueued = true
      case "suspended":
        outcome = nil
        isSuspension = true
      case "resumed": outcome = nil
      case "rolling":
        outcome = nil
        isRollback = true
      case "start", "started", "delivering": outcome = nil
      case "finish", "finished", "delivered": outcome = .finished
      case "error", "failed":
        outcome = detail.lowercased().hasPrefix("timed out") ? .timedOut : .failed
      case "dead": outcome = .deadLettered
      case "retrying":
        outcome = nil
        isRetry = true
      case "cancelled", "canceled", "dropped":
        let said = detail.lowercased()
        outcome =
          said.hasPrefix("skipped")
          ? .skipped : said.hasPrefix("replaced") ? .replaced : .cancelled
      case "ended":
        let said = detail.lowercased()
        outcome =
          said.hasPrefix("succeeded") || said.hasPrefix("finished")
          ? .finished : said.hasPrefix("failed") ? .failed : .cancelled
      default: return nil
      }
      let rest = words.dropFirst().filter { $0 != "task" }
      guard let index = rest.firstIndex(where: { Int($0.trimmingPrefix("#")) != nil }),
        let number = Int(rest[index].trimmingPrefix("#"))
      else { return nil }
      self.number = number
      var labelWords = Array(rest)
      labelWords.remove(at: index - rest.startIndex)
      self.label = labelWords.joined(separator: " ")
    }

    /// The time of a line that starts with one, `[ 120 ms] ...`, and the rest of the line.
    static func stamp(_ line: String) -> (Double, String)? {
      guard line.hasPrefix("["), let close = line.firstIndex(of: "]") else { return nil }
      let inside = line[line.index(after: line.startIndex)..<close]
        .trimmingCharacters(in: .whitespaces)
      guard inside.hasSuffix(" ms"),
        let value = Double(inside.dropLast(3).trimmingCharacters(in: .whitespaces))
      else { return nil }
      let rest = line[line.index(after: close)...].trimmingCharacters(in: .whitespaces)
      return (value, rest)
    }

    /// The line before its first `: ` (what happened) and after it (the answer).
    private static func split(_ line: String) -> (String, String) {
      guard let colon = line.range(of: ": ") ?? line.range(of: ":", options: .backwards)
      else { return (line, "") }
      return (String(line[..<colon.lowerBound]), String(line[colon.upperBound...]))
    }
  }

  // MARK: - Drawing

  /// The picture as an SVG document: plain shapes and text, no script, no external resource,
  /// so it renders on GitHub and in any browser.
  ///
  /// - Returns: The SVG text, ending with a newline.
  public func svg() -> String { svg(forPlayer: false) }

  /// The SVG, with what a run player needs when `forPlayer` is set.
  ///
  /// Each bar gets its steps and extent (`data-first`, `data-last`, `data-x`, `data-w`), the
  /// words and stripes that appear when a bar ends get `data-show`, the picture each step's
  /// place on the axis (`data-step-x`), and a highlight marks the current step's row. Without
  /// it, the static picture.
  func svg(forPlayer: Bool) -> String {
    let rowHeight = 26
    let labelWidth = max(120, (rows.map(\.label.count).max() ?? 0) * 8 + 24)
    let plotWidth = 520
    let damaged = rows.filter { $0.damage != nil }
    // The damage words sit in a column of their own, right of the bars.
    let damageWidth =
      damaged.isEmpty ? 0 : (damaged.compactMap { $0.damage?.count }.max() ?? 0) * 7 + 36
    // A fleet's rows name their holders, in turn, in a column of their own: `A, fence 1 → C,
    // fence 2` says who held the key and how the fence went up.
    let holders = rows.map { row in
      row.segments.compactMap { $0.kind == .hold ? $0.holder : nil }
    }
    let holdersWidth =
      holders.allSatisfy(\.isEmpty)
      ? 0 : (holders.map { $0.joined(separator: " → ").count }.max() ?? 0) * 7 + 36
    let width = labelWidth + plotWidth + damageWidth + holdersWidth + 24
    let captionLines = Self.wrapped(fullCaption, width: (width - 24) / 8)
    let top = 16
    let plotHeight = max(rows.count, 1) * rowHeight
    let height = top + plotHeight + 68 + captionLines.count * 18
    let low = min(rows.map(\.start).min() ?? 0, 0)
    let high = max(rows.map(\.end).max() ?? 1, low + 1)
    func x(_ value: Double) -> Int {
      labelWidth + Int(((value - low) / (high - low) * Double(plotWidth)).rounded())
    }
    // What a player reads: when a shape appears and how far it reaches.
    func drawn(_ first: Int?, _ last: Int?, _ left: Int, _ right: Int) -> String {
      guard forPlayer else { return "" }
      return " data-first=\"\(first ?? 0)\" data-last=\"\(last ?? steps.count)\" "
        + "data-x=\"\(left)\" data-w=\"\(right - left)\""
    }
    func shown(at step: Int?) -> String {
      forPlayer ? " data-show=\"\(step ?? steps.count)\"" : ""
    }
    // A bar that has not ended yet is drawn as running (the legend says so); its colour once
    // it ends is `data-fill`.
    func ended(_ colour: String) -> String {
      forPlayer ? " data-fill=\"\(colour)\" data-running-fill=\"\(Self.colour(.running))\"" : ""
    }
    var runningInLegend = false
    var parts: [String] = [
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" "
        + "viewBox=\"0 0 \(width) \(height)\" font-family=\"Helvetica, Arial, sans-serif\" "
        + "font-size=\"13\" role=\"img\" aria-labelledby=\"picture-title picture-desc\""
        + (forPlayer
          ? " id=\"orderly-picture\" data-top=\"\(top)\" data-row-height=\"\(rowHeight)\" "
            + "data-step-x=\"\(steps.map { "\(x($0.position))" }.joined(separator: " "))\""
          : "") + ">",
      "<title id=\"picture-title\">\(Self.escaped(fullCaption))</title>",
      "<desc id=\"picture-desc\">\(Self.escaped(description))</desc>",
      // Diagonal stripes over a wrong answer's bar: it reads without colour, in grey print too.
      "<defs><pattern id=\"wrong-answer\" patternUnits=\"userSpaceOnUse\" width=\"6\" "
        + "height=\"6\" patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" "
        + "fill=\"#5f2120\" fill-opacity=\"0.55\"/></pattern></defs>",
      "<rect width=\"\(width)\" height=\"\(height)\" fill=\"#ffffff\"/>",
    ]
    // The bands go under the highlight, which goes under the bars: both are put in after the
    // header above once the rows are drawn.
    let header = parts.count
    var bands: [String] = []
    for (index, row) in rows.enumerated() {
      let y = top + index * rowHeight
      if index % 2 == 0 {
        bands.append(
          "<rect x=\"0\" y=\"\(y)\" width=\"\(width)\" height=\"\(rowHeight)\" fill=\"#f5f5f7\"/>"
        )
      }
      parts.append(
        "<text x=\"12\" y=\"\(y + 17)\" fill=\"#1d1d1f\">\(Self.escaped(row.label))</text>"
      )
      let start = x(row.start)
      let end = max(x(row.end), start + 3)
      let what = row.damage.map { "wrong answer: \($0)" } ?? row.outcome.rawValue
      let bar =
        "x=\"\(start)\" y=\"\(y + 5)\" width=\"\(end - start)\" height=\"\(rowHeight - 10)\" rx=\"3\""
      if !holders[index].isEmpty {
        let spans = holders[index].enumerated().map { turn, holder in
          (turn == 0 ? "" : "<tspan fill=\"#515154\"> → </tspan>")
            + "<tspan fill=\"\(Self.holderColour(holder))\">\(Self.escaped(holder))</tspan>"
        }
        parts.append(
          "<text x=\"\(labelWidth + plotWidth + damageWidth + 16)\" y=\"\(y + 17)\""
            + "\(shown(at: row.lastStep)) font-weight=\"bold\">\(spans.joined())</text>"
        )
      }
      if !row.segments.isEmpty {
        for segment in row.segments {
          let left = x(segment.start)
          let right = max(x(segment.end), left + 3)
          let shape =
            "x=\"\(left)\" y=\"\(y + 5)\" width=\"\(right - left)\" height=\"\(rowHeight - 10)\" rx=\"3\""
          let what = segment.kind == .lastAttempt ? row.outcome.rawValue : segment.kind.rawValue
          let reach = drawn(segment.firstStep, segment.lastStep, left, right)
          switch segment.kind {
          case .hold:
            let holder = segment.holder ?? ""
            let ending = segment.ending.map { ", \($0.rawValue)" } ?? ""
            parts.append(
              "<rect \(shape)\(reach) fill=\"\(Self.holderColour(holder))\"><title>"
                + "\(Self.escaped(row.label)): held by \(Self.escaped(holder))\(ending)</title></rect>"
            )
            // The holder's name inside its bar, where it fits.
            if Double(right - left) >= Double(holder.count) * 6.5 + 8 {
              parts.append(
                "<text x=\"\(left + 5)\" y=\"\(y + 17)\"\(shown(at: segment.firstStep)) "
                  + "fill=\"#ffffff\" font-size=\"11\">\(Self.escaped(holder))</text>"
              )
            }
            if let ending = segment.ending {
              parts.append(
                "<rect x=\"\(right - 4)\" y=\"\(y + 2)\" width=\"4\" height=\"\(rowHeight - 4)\"\(shown(at: segment.lastStep)) "
                  + "fill=\"\(Self.endingColour(ending))\"><title>\(Self.escaped(row.label)): "
                  + "\(Self.escaped(ending.rawValue))</title></rect>"
              )
            }
          case .leaseWait:
            parts.append(
              "<rect \(shape)\(reach) fill=\"#ffffff\" stroke=\"#a50e0e\" stroke-dasharray=\"4 3\">"
                + "<title>\(Self.escaped(row.label)): waiting for the lease to run out</title></rect>"
            )
          case .rollback:
            parts.append(
              "<rect \(shape)\(reach) fill=\"\(Self.rollbackColour)\" stroke=\"#1d1d1f\" "
                + "stroke-dasharray=\"2 2\"><title>\(Self.escaped(row.label)): rolling back</title></rect>"
            )
          case .suspended:
            parts.append(
              "<rect \(shape)\(reach) fill=\"#ffffff\" stroke=\"#1967d2\" "
                + "stroke-width=\"2\" stroke-dasharray=\"1 3\"><title>\(Self.escaped(row.label)): "
                + "suspended, off the actor</title></rect>"
            )
          case .queued:
            parts.append(
              "<rect \(shape)\(reach) fill=\"#ffffff\" stroke=\"#80868b\" stroke-dasharray=\"2 2\">"
                + "<title>\(Self.escaped(row.label)): waiting in line</title></rect>"
            )
          case .wait:
            parts.append(
              "<rect \(shape)\(reach) fill=\"#ffffff\" stroke=\"#5f6368\" stroke-dasharray=\"4 3\">"
                + "<title>\(Self.escaped(row.label)): backoff wait</title></rect>"
            )
          case .failedAttempt, .lastAttempt:
            let colour =
              segment.kind == .failedAttempt ? Self.colour(.failed) : Self.colour(row.outcome)
            parts.append(
              "<rect \(shape)\(reach)\(ended(colour)) fill=\"\(colour)\"><title>\(Self.escaped(row.label)): "
                + "\(Self.escaped(what))</title></rect>"
            )
          }
        }
        continue
      }
      let reach = drawn(row.firstStep, row.lastStep, start, end)
      if let damage = row.damage {
        parts.append(
          "<rect \(bar)\(reach)\(ended(Self.wrongColour)) fill=\"\(Self.wrongColour)\"><title>\(Self.escaped(row.label)): "
            + "\(Self.escaped(what))</title></rect>"
        )
        parts.append("<rect \(bar)\(shown(at: row.lastStep)) fill=\"url(#wrong-answer)\"/>")
        parts.append(
          "<text x=\"\(labelWidth + plotWidth + 16)\" y=\"\(y + 17)\"\(shown(at: row.lastStep)) "
            + "fill=\"#a50e0e\">✗ \(Self.escaped(damage))</text>"
        )
      } else {
        parts.append(
          "<rect \(bar)\(reach)\(ended(Self.colour(row.outcome))) fill=\"\(Self.colour(row.outcome))\"\(Self.outline(row.outcome))>"
            + "<title>\(Self.escaped(row.label)): "
            + "\(Self.escaped(what))</title></rect>"
        )
      }
    }
    let highlight =
      forPlayer
      ? [
        "<rect id=\"orderly-current-row\" x=\"0\" y=\"\(top)\" width=\"\(width)\" "
          + "height=\"\(rowHeight)\" fill=\"#fff4ce\" stroke=\"#8a6100\" visibility=\"hidden\"/>"
      ] : []
    parts.insert(contentsOf: bands + highlight, at: header)
    let axisY = top + plotHeight + 6
    parts.append(
      "<line x1=\"\(labelWidth)\" y1=\"\(axisY)\" x2=\"\(labelWidth + plotWidth)\" y2=\"\(axisY)\" "
        + "stroke=\"#86868b\"/>"
    )
    if unit == "step" {
      parts.append(
        "<text x=\"\(labelWidth)\" y=\"\(axisY + 17)\" fill=\"#515154\">"
          + "events, in the order they happened →</text>"
      )
    } else {
      // Time is the story: ticks at round values, and the axis named in the labels' column.
      parts.append(
        "<text x=\"\(labelWidth - 10)\" y=\"\(axisY + 17)\" fill=\"#515154\" "
          + "text-anchor=\"end\">time →</text>"
      )
      for value in Self.ticks(from: low, to: high) {
        let tickX = x(value)
        let nearEnd = tickX >= labelWidth + plotWidth - 20
        let anchor = tickX <= labelWidth + 1 ? "start" : nearEnd ? "end" : "middle"
        let number = Self.number(value)
        parts.append(
          "<line x1=\"\(tickX)\" y1=\"\(axisY)\" x2=\"\(tickX)\" y2=\"\(axisY + 5)\" "
            + "stroke=\"#86868b\"/>"
            + "<text x=\"\(tickX)\" y=\"\(axisY + 17)\" fill=\"#515154\" font-size=\"11\" "
            + "text-anchor=\"\(anchor)\">\(number) \(Self.escaped(unit))</text>"
        )
      }
    }
    // The legend has a line of its own, under the axis's, right-aligned.
    let legendY = axisY + 18
    var legendX = labelWidth + plotWidth + damageWidth + holdersWidth
    if !damaged.isEmpty {
      let words = "wrong answer"
      legendX -= words.count * 7 + 26
      parts.append(
        "<rect x=\"\(legendX)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-legend=\"1\" fill=\"\(Self.wrongColour)\"/>"
          + "<rect x=\"\(legendX)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "fill=\"url(#wrong-answer)\"/>"
          + "<text x=\"\(legendX + 16)\" y=\"\(legendY + 17)\" fill=\"#515154\">\(words)</text>"
      )
    }
    /// A legend entry, right to left: its swatch (drawn at the given x) and its words.
    func legend(_ words: String, swatch: (Int) -> String) {
      legendX -= words.count * 7 + 26
      parts.append(
        swatch(legendX)
          + "<text x=\"\(legendX + 16)\" y=\"\(legendY + 17)\" fill=\"#515154\">\(words)</text>"
      )
    }
    // Each holder's colour, by worker (`A` of `A, fence 1`), in the names' order.
    var workers: [String] = []
    for segment in rows.flatMap(\.segments) where segment.kind == .hold {
      let worker = String((segment.holder ?? "").prefix { $0 != "," })
      if !workers.contains(worker) { workers.append(worker) }
    }
    for worker in workers.sorted().reversed() {
      legend("held by \(worker)") { x in
        "<rect x=\"\(x)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-legend=\"1\" fill=\"\(Self.holderColour(worker))\"/>"
      }
    }
    for ending in [Segment.Ending.released, .killed]
    where rows.contains(where: { $0.segments.contains { $0.ending == ending } }) {
      legend(ending.rawValue) { x in
        "<rect x=\"\(x + 4)\" y=\"\(legendY + 5)\" width=\"4\" height=\"16\" "
          + "data-legend=\"1\" fill=\"\(Self.endingColour(ending))\"/>"
      }
    }
    if rows.contains(where: { $0.segments.contains { $0.kind == .suspended } }) {
      legend(Segment.Kind.suspended.rawValue) { x in
        "<rect x=\"\(x)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-legend=\"1\" fill=\"#ffffff\" stroke=\"#1967d2\" stroke-width=\"2\" "
          + "stroke-dasharray=\"1 3\"/>"
      }
    }
    if rows.contains(where: { $0.segments.contains { $0.kind == .rollback } }) {
      legend(Segment.Kind.rollback.rawValue) { x in
        "<rect x=\"\(x)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-legend=\"1\" fill=\"\(Self.rollbackColour)\" stroke=\"#1d1d1f\" "
          + "stroke-dasharray=\"2 2\"/>"
      }
    }
    for (kind, stroke, dashes) in [
      (Segment.Kind.leaseWait, "#a50e0e", "4 3"), (.wait, "#5f6368", "4 3"),
      (.queued, "#80868b", "2 2"),
    ]
    where rows.contains(where: { $0.segments.contains { $0.kind == kind } }) {
      legend(kind.rawValue) { x in
        "<rect x=\"\(x)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-legend=\"1\" fill=\"#ffffff\" stroke=\"\(stroke)\" stroke-dasharray=\"\(dashes)\"/>"
      }
    }
    let failedAttempts = rows.contains { $0.segments.contains { $0.kind == .failedAttempt } }
    for outcome in [
      Outcome.running, .skipped, .replaced, .cancelled, .timedOut, .deadLettered, .failed,
      .finished,
    ]
    where rows.contains(where: {
      $0.outcome == outcome && $0.damage == nil && !$0.segments.contains { $0.kind == .hold }
    })
      || (outcome == .failed && failedAttempts)
    {
      runningInLegend = runningInLegend || outcome == .running
      let failedRows = rows.contains { $0.outcome == .failed && $0.segments.isEmpty }
      let name =
        outcome == .failed && failedAttempts && !failedRows ? "failed attempt" : outcome.rawValue
      legendX -= name.count * 7 + 26
      parts.append(
        "<rect x=\"\(legendX)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-legend=\"1\" fill=\"\(Self.colour(outcome))\"\(Self.outline(outcome))/>"
          + "<text x=\"\(legendX + 16)\" y=\"\(legendY + 17)\" fill=\"#515154\">"
          + "\(name)</text>"
      )
    }
    // A replay draws every bar that has not ended yet as running: its legend says so, in an
    // entry the static picture (every bar ended or running already) does not need.
    let replayedBars = rows.contains { row in
      row.segments.isEmpty || row.segments.contains(where: \.isAttempt)
    }
    if forPlayer, !runningInLegend, replayedBars {
      let name = "running"
      legendX -= name.count * 7 + 26
      parts.append(
        "<rect x=\"\(legendX)\" y=\"\(legendY + 7)\" width=\"12\" height=\"12\" rx=\"2\" "
          + "data-player-only=\"1\" data-legend=\"1\" fill=\"\(Self.colour(.running))\"/>"
          + "<text x=\"\(legendX + 16)\" y=\"\(legendY + 17)\" data-player-only=\"1\" "
          + "fill=\"#515154\">\(name)</text>"
      )
    }
    for (index, line) in captionLines.enumerated() {
      parts.append(
        "<text x=\"12\" y=\"\(axisY + 62 + index * 18)\" fill=\"#1d1d1f\" font-weight=\"bold\">"
          + "\(Self.escaped(line))</text>"
      )
    }
    parts.append("</svg>")
    return parts.joined(separator: "\n") + "\n"
  }

  /// The caption with, when the answers were checked, how many went wrong.
  public var fullCaption: String {
    guard answersChecked else { return caption }
    let wrong = rows.filter { $0.damage != nil }.count
    switch wrong {
    case 0: return caption + " — every answer as in order"
    case 1: return caption + " — 1 of \(rows.count) calls answered wrongly"
    default: return caption + " — \(wrong) of \(rows.count) calls answered wrongly"
    }
  }

  /// What happened to the jobs tried more than once or given up, as in `#1 delivered after 3
  /// attempts, #3 a dead letter`; empty when there were none.
  public var attemptsSummary: String {
    rows.compactMap { row -> String? in
      let name = row.label.split(separator: " ").first.map(String.init) ?? row.label
      let attempts = row.attempts
      if row.outcome == .deadLettered {
        return attempts > 1
          ? "\(name) a dead letter after \(attempts) attempts" : "\(name) a dead letter"
      }
      guard attempts > 1 else { return nil }
      return
        "\(name) \(row.outcome == .finished ? "delivered" : row.outcome.rawValue) after \(attempts) attempts"
    }.joined(separator: ", ")
  }

  /// The picture in one sentence or two, for a page's alt text: the caption, with its count of
  /// wrong answers, and what each wrong answer was.
  public var altText: String {
    let damage = rows.compactMap { row in row.damage.map { "\(row.label): \($0)" } }
    let text = damage.isEmpty ? fullCaption : fullCaption + ". " + damage.joined(separator: "; ")
    return text.replacingOccurrences(of: "[", with: "(").replacingOccurrences(of: "]", with: ")")
  }

  /// The picture in words, for a screen reader: each row, how it ended, and its damage.
  public var description: String {
    rows.map { row in
      let attempts = row.attempts
      let holders = row.segments.compactMap { segment -> String? in
        guard segment.kind == .hold, let holder = segment.holder else { return nil }
        return holder + (segment.ending.map { " (\($0.rawValue))" } ?? "")
      }
      let tries =
        attempts > 1
        ? " after \(attempts) attempts"
        : holders.isEmpty ? "" : " (held by \(holders.joined(separator: ", then ")))"
      let when =
        unit == "step" ? "" : ", \(Self.number(row.start)) to \(Self.number(row.end)) \(unit)"
      return "\(row.label): "
        + (row.damage.map { "wrong answer, \($0)" } ?? row.outcome.rawValue + tries) + when
    }.joined(separator: "; ")
  }

  /// A value as a reader writes it: `300`, `2.5`.
  static func number(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value))" : String(format: "%g", value)
  }

  /// Round values from `low` to `high` for an axis's ticks: steps of 1, 2 or 5 times a power
  /// of ten, at most six of them past the first.
  package static func ticks(from low: Double, to high: Double) -> [Double] {
    let span = high - low
    guard span > 0 else { return [low] }
    let smallest = span / 6
    let power = pow(10, log10(smallest).rounded(.down))
    let step = [1.0, 2, 5].map { $0 * power }.first { $0 >= smallest } ?? 10 * power
    var values: [Double] = []
    var value = (low / step).rounded(.up) * step
    while value <= high + step * 1e-9 {
      values.append(value)
      value += step
    }
    return values
  }

  /// The text split into lines of at most `width` characters, at spaces.
  private static func wrapped(_ text: String, width: Int) -> [String] {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ") {
      if !line.isEmpty, line.count + 1 + word.count > width {
        lines.append(line)
        line = ""
      }
      line += (line.isEmpty ? "" : " ") + word
    }
    if !line.isEmpty { lines.append(line) }
    return lines.isEmpty ? [""] : lines
  }

  /// A holder's bar: one colour per worker (by its name's first letter), each dark enough for
  /// white words (4.5:1) and apart from the outcome colours.
  package static func holderColour(_ holder: String) -> String {
    let palette = ["#1967d2", "#8430ce", "#00796b", "#b06000", "#5f6368"]
    let letter = holder.unicodeScalars.first.map { Int($0.value) } ?? 0
    return palette[letter % palette.count]
  }

  /// The mark at the end of a hold that did not end with a delivery.
  static func endingColour(_ ending: Segment.Ending) -> String {
    switch ending {
    case .killed: "#d93025"
    case .released: "#1d1d1f"
    }
  }

  /// A cancelled job rolling back: the cancelled grey's darker kin, with a dark dotted outline.
  static let rollbackColour = "#5f6368"

  /// A finished call whose answer is wrong: dark orange (4.5:1 on white), under dark stripes.
  private static let wrongColour = "#b06000"

  /// The outline of a bar whose fill is too light to see on its own: a skipped step's.
  static func outline(_ outcome: Outcome) -> String {
    outcome == .skipped ? " stroke=\"#5f6368\" stroke-dasharray=\"2 2\"" : ""
  }

  /// The fill of a bar: each passes 3:1 against the white background (WCAG's contrast for
  /// graphics), but a skipped step's, which is drawn with a dark outline that does.
  static func colour(_ outcome: Outcome) -> String {
    switch outcome {
    case .finished: "#34a853"
    case .failed: "#d93025"
    case .cancelled: "#80868b"
    case .running: "#1a73e8"
    case .deadLettered: "#7f1d1d"
    case .skipped: "#d2d5d9"
    case .timedOut: "#8430ce"
    case .replaced: "#00796b"
    }
  }

  private static func escaped(_ text: String) -> String {
    var result = ""
    for character in text {
      switch character {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"": result += "&quot;"
      default: result.append(character)
      }
    }
    return result
  }
}
