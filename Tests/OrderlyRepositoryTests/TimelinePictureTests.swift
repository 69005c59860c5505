import Foundation
import OrderlyCore
import OrderlyCourse
import OrderlyRepository
import Testing

@Suite("TimelinePicture")
struct TimelinePictureTests {
  @Test("log lines become one row per job, in steps, with outcomes; other lines take no step")
  func rowsFromLog() {
    let rows = TimelinePicture.rows(fromLog: [
      "Unordered tasks:",
      "  start 1 fetchNotes",
      "  start 2 fetchNote",
      "  finish 2 fetchNote: note 1: groceries",
      "  a line that is not an event",
      "  error 1 fetchNotes: injected failure",
      "  started save #3",
      "  ended save #3: cancelled",
      "  start task 4 (deleteNote)",
    ])
    #expect(
      rows == [
        .init(
          label: "1 fetchNotes",
          start: 0.5,
          end: 4.5,
          outcome: .failed,
          firstStep: 1,
          lastStep: 4
        ),
        .init(
          label: "2 fetchNote",
          start: 1.5,
          end: 3.5,
          outcome: .finished,
          firstStep: 2,
          lastStep: 3
        ),
        .init(
          label: "3 save",
          start: 4.5,
          end: 6.5,
          outcome: .cancelled,
          firstStep: 5,
          lastStep: 6
        ),
        .init(
          label: "4 (deleteNote)",
          start: 6.5,
          end: 7.5,
          outcome: .running,
          firstStep: 7,
          lastStep: 7
        ),
      ]
    )
  }

  @Test("the SVG draws a labelled, coloured bar per row and the caption, escaped")
  func svg() {
    let picture = TimelinePicture(
      rows: [
        .init(label: "1 <fetch>", start: 0, end: 2, outcome: .finished),
        .init(label: "2 update & save", start: 1, end: 3, outcome: .failed),
      ],
      unit: "step",
      caption: "out of order: task 2 finished before task 1"
    )
    let svg = picture.svg()
    #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
    #expect(svg.hasSuffix("</svg>\n"))
    #expect(svg.contains("1 &lt;fetch&gt;") && svg.contains("2 update &amp; save"))
    #expect(svg.contains("#34a853") && svg.contains("#d93025"))
    #expect(svg.contains("out of order: task 2 finished before task 1"))
    #expect(!svg.contains("<script"))
  }

  @Test("an activity log draws in steps with its verdict as the caption")
  func fromEntries() {
    let entries = [
      ActivityEntry(call: 1, operation: .fetchNotes, kind: .start),
      ActivityEntry(call: 2, operation: .deleteNote, kind: .start),
      ActivityEntry(call: 2, operation: .deleteNote, kind: .finish("deleted note 2")),
      ActivityEntry(call: 1, operation: .fetchNotes, kind: .finish("1 note")),
    ]
    let picture = TimelinePicture(entries: entries)
    #expect(picture.rows.map(\.label) == ["1 fetchNotes", "2 deleteNote"])
    #expect(picture.caption == "out of order: task 2 finished before task 1")
  }

  @Test("consequences name each call whose answer differs from the in-order run")
  func consequences() async {
    let scenario = NotesScenario(seed: 3, latency: .milliseconds(20) ... .milliseconds(380))
    let inOrder = await NotesScenario<ContinuousClock>.answersInOrder()
    #expect(
      inOrder == [
        "2 notes", "note 1: groceries", "note 3: todo", "3 notes", "note 1: shopping",
        "3 notes", "deleted note 2",
      ]
    )
    let entries = [
      ActivityEntry(call: 4, operation: .fetchNotes, kind: .finish("2 notes")),
      ActivityEntry(call: 1, operation: .fetchNotes, kind: .finish("2 notes")),
      ActivityEntry(call: 5, operation: .updateNote, kind: .error("failed")),
    ]
    #expect(
      await scenario.consequences(of: entries) == [
        "call 4 fetchNotes saw 2 notes; in order it would have seen 3 notes"
      ]
    )
  }
}

@Suite("TimelinePicture: damage on the picture")
struct TimelinePictureDamageTests {
  @Test("consequence sentences become a few words per call")
  func damageFromConsequences() {
    let damage = TimelinePicture.damage(fromConsequences: [
      "  call 2 fetchNote saw note 1: shopping; in order it would have seen note 1: groceries",
      "call 4 fetchNotes saw 2 notes; in order it would have seen 3 notes",
      "not a consequence",
    ])
    #expect(
      damage == [2: "saw note 1: shopping, not note 1: groceries", 4: "saw 2 notes, not 3 notes"]
    )
  }

  @Test("a wrong answer is hatched, named beside its bar, in the legend, the caption and the text")
  func wrongAnswerDrawn() {
    let picture = TimelinePicture(
      rows: [
        .init(label: "1 fetchNotes", start: 0, end: 2, outcome: .finished),
        .init(
          label: "2 fetchNotes",
          start: 1,
          end: 3,
          outcome: .finished,
          damage: "saw 2 notes, not 3 notes"
        ),
      ],
      unit: "step",
      caption: "out of order",
      answersChecked: true
    )
    let svg = picture.svg()
    #expect(picture.fullCaption == "out of order — 1 of 2 calls answered wrongly")
    #expect(svg.contains("fill=\"url(#wrong-answer)\""))
    #expect(svg.contains("✗ saw 2 notes, not 3 notes"))
    #expect(svg.contains(">wrong answer</text>"))
    #expect(
      svg.contains(
        "<title id=\"picture-title\">out of order — 1 of 2 calls answered wrongly</title>"
      )
    )
    #expect(svg.contains("2 fetchNotes: wrong answer, saw 2 notes, not 3 notes"))
  }

  @Test("a healthy run says so; a picture whose answers were not checked says nothing of them")
  func healthyRun() {
    let rows = [TimelinePicture.Row(label: "1 fetchNotes", start: 0, end: 1, outcome: .finished)]
    let checked = TimelinePicture(
      rows: rows,
      unit: "step",
      caption: "in order",
      answersChecked: true
    )
    #expect(checked.fullCaption == "in order — every answer as in order")
    #expect(!checked.svg().contains("wrong-answer)"))
    let unchecked = TimelinePicture(rows: rows, unit: "step", caption: "in order")
    #expect(unchecked.fullCaption == "in order")
  }

  @Test("a long caption wraps inside the picture instead of running off its edge")
  func captionWraps() {
    let rows = [TimelinePicture.Row(label: "1 fetchNotes", start: 0, end: 1, outcome: .finished)]
    let caption = Array(repeating: "word", count: 60).joined(separator: " ")
    let svg = TimelinePicture(rows: rows, unit: "step", caption: caption).svg()
    let captionLines = svg.split(separator: "\n").filter { $0.contains("font-weight=\"bold\"") }
    #expect(captionLines.count >= 3)
  }
}

@Suite("TimelinePicture: an outbox's attempts")
struct TimelinePictureAttemptsTests {
  @Test("retries become segments on the message's row: failed attempts, waits, the last attempt")
  func attemptsAsSegments() {
    let rows = TimelinePicture.rows(fromLog: [
      "  delivering #1",
      "  retrying #1 in 0.1 seconds: the server is unreachable",
      "  delivering #1 (attempt 2)",
      "  retrying #1 in 0.2 seconds: the server is unreachable",
      "  delivering #1 (attempt 3)",
      "  delivered #1",
      "  delivering #2",
      "  delivered #2",
      "  delivering #3",
      "  dead letter #3: 404: the server has no note 7 (line stopped)",
    ])
    #expect(rows.map(\.outcome) == [.finished, .finished, .deadLettered])
    #expect(
      rows[0].segments.map(\.kind) == [.failedAttempt, .wait, .failedAttempt, .wait, .lastAttempt]
    )
    #expect(rows[1].segments.isEmpty && rows[2].segments.isEmpty)
    // Each part starts where the one before it ended.
    for (before, after) in zip(rows[0].segments, rows[0].segments.dropFirst()) {
      #expect(after.start >= before.end - 0.5 && after.start <= before.end + 0.5)
    }
    let picture = TimelinePicture(rows: rows, unit: "step", caption: "Outbox basics")
    #expect(picture.attemptsSummary == "1 delivered after 3 attempts, 3 a dead letter")
    let svg = picture.svg()
    #expect(svg.contains(">backoff wait</text>") && svg.contains(">failed attempt</text>"))
    #expect(svg.contains(">dead letter</text>"))
    #expect(svg.contains("1: finished after 3 attempts; 2: finished; 3: dead letter"))
  }
}

@Suite("TimelinePicture: readable by everyone")
struct TimelinePictureContrastTests {
  /// WCAG's contrast ratio of a `#rrggbb` colour against white.
  static func contrastOnWhite(_ hex: String) -> Double {
    let value = Int(hex.dropFirst(), radix: 16) ?? 0
    let channels = [(value >> 16) & 0xFF, (value >> 8) & 0xFF, value & 0xFF].map { channel in
      let c = Double(channel) / 255
      return c <= 0.03928 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
    }
    let luminance = 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]
    return 1.05 / (luminance + 0.05)
  }

  @Test("every bar passes 3:1 on white (a skipped step by its outline), every text 4.5:1")
  func contrast() throws {
    let outcomes: [TimelinePicture.Outcome] = [
      .finished, .failed, .cancelled, .running, .deadLettered, .skipped, .timedOut, .replaced,
    ]
    var rows = outcomes.enumerated().map { index, outcome in
      TimelinePicture.Row(
        label: "\(index + 1) step",
        start: Double(index),
        end: Double(index + 1),
        outcome: outcome
      )
    }
    rows.append(.init(label: "9 fetchNotes", start: 0, end: 1, outcome: .finished, damage: "saw 1"))
    let svg = TimelinePicture(rows: rows, unit: "step", caption: "all", answersChecked: true).svg()
    let bars = try Regex(
      #"<rect [^>]*fill="(#[0-9a-f]{6})"( stroke="(#[0-9a-f]{6})")?[^>]*><title>"#
    )
    var checked = 0
    for match in svg.matches(of: bars) {
      let fill = String(match.output[1].substring ?? "")
      let stroke = match.output[3].substring.map(String.init)
      let seen = max(Self.contrastOnWhite(fill), stroke.map(Self.contrastOnWhite) ?? 0)
      #expect(seen >= 3, "a bar filled \(fill) has contrast \(seen):1 on white")
      checked += 1
    }
    #expect(checked == rows.count)
    let texts = try Regex(#"<text [^>]*fill="(#[0-9a-f]{6})""#)
    for match in svg.matches(of: texts) {
      let fill = String(match.output[1].substring ?? "")
      #expect(Self.contrastOnWhite(fill) >= 4.5, "text in \(fill) is too faint on white")
    }
  }
}

@Suite("TimelinePicture: time on an injected clock, and the run player")
struct TimelinePictureTimeTests {
  static let outboxLog = [
    "Online: the first attempts fail, and are retried with backoff",
    "  [  0 ms] delivering #1",
    "  [ 20 ms] retrying #1 in 0.1 seconds: the server is unreachable",
    "  [120 ms] delivering #1 (attempt 2)",
    "  [140 ms] retrying #1 in 0.2 seconds: the server is unreachable",
    "  [340 ms] delivering #1 (attempt 3)",
    "  [360 ms] delivered #1",
    "  [360 ms] delivering #2",
    "  [380 ms] delivered #2",
  ]

  @Test("a log whose events all carry their time is drawn on that time, with ticks")
  func timedLog() {
    let picture = TimelinePicture(log: Self.outboxLog, caption: "Outbox basics")
    #expect(picture.unit == "ms")
    #expect(picture.rows.map(\.start) == [0, 360])
    #expect(picture.rows.map(\.end) == [360, 380])
    let waits = picture.rows[0].segments.filter { $0.kind == .wait }
    #expect(waits.map { $0.end - $0.start } == [100, 200])
    #expect(picture.steps.map(\.position) == [0, 20, 120, 140, 340, 360, 360, 380])
    #expect(picture.steps.map(\.row) == [0, 0, 0, 0, 0, 0, 1, 1])
    #expect(picture.steps[1].line == "retrying #1 in 0.1 seconds: the server is unreachable")
    let svg = picture.svg()
    #expect(svg.contains(">time →</text>"))
    for tick in ["0 ms", "100 ms", "200 ms", "300 ms"] {
      #expect(svg.contains(">\(tick)</text>"), "no tick \(tick)")
    }
    #expect(!svg.contains("in the order they happened"))
    #expect(picture.description.contains("#1") || picture.description.contains("1: finished"))
    #expect(picture.description.contains("0 to 360 ms"))
  }

  @Test("a log with an event without its time keeps the order of events, and says so")
  func untimedLog() {
    var log = Self.outboxLog
    log[3] = "  delivering #1 (attempt 2)"
    let picture = TimelinePicture(log: log, caption: "Outbox basics")
    #expect(picture.unit == "step")
    #expect(picture.steps.map(\.position) == [1, 2, 3, 4, 5, 6, 7, 8])
    #expect(picture.svg().contains("events, in the order they happened →"))
  }

  @Test("ticks are round values, at most seven")
  func ticks() {
    #expect(TimelinePicture.ticks(from: 0, to: 440) == [0, 100, 200, 300, 400])
    #expect(TimelinePicture.ticks(from: 0, to: 220) == [0, 50, 100, 150, 200])
    #expect(TimelinePicture.ticks(from: 0, to: 7) == [0, 2, 4, 6])
    for high in [1.0, 3, 13, 99, 1234, 50_000] {
      let values = TimelinePicture.ticks(from: 0, to: high)
      #expect(values.count >= 2 && values.count <= 7, "\(values) for 0...\(high)")
      #expect(values.first == 0 && (values.last ?? .infinity) <= high)
    }
  }

  @Test("the player page holds the picture, one log line per step, and its controls")
  func player() throws {
    let picture = TimelinePicture(log: Self.outboxLog, caption: "Outbox basics")
    let page = picture.playerPage(title: "Lesson 9", back: ("../09-outbox.html", "Back"))
    #expect(page.contains("id=\"orderly-picture\""))
    #expect(page.contains("data-step-x=\""))
    for id in ["play", "back", "step", "slider", "position"] {
      #expect(page.contains("id=\"\(id)\""), "no control \(id)")
    }
    let lines = page.components(separatedBy: "<li id=\"step-").count - 1
    #expect(lines == picture.steps.count)
    #expect(page.contains("data-row=\"1\""))
    #expect(page.contains("href=\"../09-outbox.html\""))
    // Nothing fetched from elsewhere: the script and the style sheet sit beside the page.
    #expect(page.contains("<script src=\"player.js\"></script>"))
    #expect(page.contains("<link rel=\"stylesheet\" href=\"player.css\">"))
    #expect(!page.contains("src=\"http") && !page.contains("href=\"http"))
    // The script the page links reads the picture this page holds.
    let script = try String(
      contentsOf: URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/course/players/player.js"),
      encoding: .utf8
    )
    #expect(script.contains("getElementById(\"orderly-picture\")"))
    #expect(script.contains("data-step-x") && script.contains("data-first"))
    // Every bar of the static picture appears in the player, with its steps.
    let bars = try Regex(#"data-first="(\d+)" data-last="(\d+)""#)
    let reaches = page.matches(of: bars).map { (Int($0.output[1].substring ?? "") ?? 0) }
    #expect(reaches.count == picture.rows[0].segments.count + 1)
    #expect(reaches.allSatisfy { $0 >= 1 && $0 <= picture.steps.count })
    // The static picture has none of the player's attributes.
    #expect(!picture.svg().contains("data-first"))
  }

  @Test("a fleet's keys: who held each, the kill, the lease running out, the hand-over on SIGTERM")
  func holds() {
    let log = [
      "[0 ms] took 1 alice: A, fence 1",
      "[100 ms] took 2 carol: B, fence 1",
      "[1000 ms] killed 1 alice: A was killed holding the key",
      "[1010 ms] released 2 carol: B stopped on SIGTERM",
      "[1050 ms] took 2 carol: C, fence 2",
      "[1200 ms] delivered 2 carol: #16 #17 #18",
      "[3000 ms] took 1 alice: C, fence 2",
      "[3300 ms] delivered 1 alice: #4 #5 #6",
    ]
    let picture = TimelinePicture(log: log, caption: "hand-over")
    #expect(picture.unit == "ms")
    #expect(picture.rows.map(\.label) == ["1 alice", "2 carol"])
    #expect(picture.rows.map(\.outcome) == [.finished, .finished])
    let alice = picture.rows[0].segments
    #expect(alice.map(\.kind) == [.hold, .leaseWait, .hold])
    #expect(alice.map(\.holder) == ["A, fence 1", nil, "C, fence 2"])
    #expect(alice.map(\.ending) == [.killed, nil, nil])
    #expect(alice.map(\.start) == [0, 1000, 3000] && alice.map(\.end) == [1000, 3000, 3300])
    let carol = picture.rows[1].segments
    #expect(carol.map(\.kind) == [.hold, .hold])
    #expect(carol.map(\.ending) == [.released, nil])
    #expect(carol.map(\.start) == [100, 1050])
    // Holds are not attempts: nothing is summed up as retried.
    #expect(picture.attemptsSummary.isEmpty)
    #expect(picture.description.contains("held by A, fence 1 (killed (SIGKILL)), then C, fence 2"))
    let svg = picture.svg()
    for words in [
      "killed (SIGKILL)", "released on SIGTERM", "waiting for the lease to run out",
      ">A, fence 1</text>", "held by C, fence 2",
    ] {
      #expect(svg.contains(words), "no \(words)")
    }
    // The legend names each worker's colour.
    for worker in ["A", "B", "C"] {
      let colour = TimelinePicture.holderColour(worker)
      let named = svg.contains("data-legend=\"1\" fill=\"\(colour)\"/>")
      #expect(named && svg.contains(">held by \(worker)</text>"), "\(worker)")
    }
  }
}

@Suite("StoryClock")
struct StoryClockTests {
  @Test("jobs on a limited queue get the times their durations give, ends before starts")
  func boundedQueueTimes() async throws {
    let story = StoryClock()
    let queue = ConcurrentQueue(name: "story", limit: 2)
    for (index, milliseconds) in [30, 10, 25].enumerated() {
      queue.enqueue {
        story.record(.start, index + 1, "job")
        let end = try await story.work(for: .milliseconds(milliseconds))
        story.record(.finish, index + 1, "job", at: end)
      }
    }
    for inFlight in [2, 2, 1] { try await story.advance(whenSleeping: inFlight) }
    try await queue.waitUntilIdle()
    let lines = story.lines
    #expect(
      lines == [
        "[ 0 ms] start 1 job", "[ 0 ms] start 2 job", "[10 ms] finish 2 job",
        "[10 ms] start 3 job", "[30 ms] finish 1 job", "[35 ms] finish 3 job",
      ]
    )
    let picture = TimelinePicture(log: lines, caption: "story")
    #expect(picture.unit == "ms")
    #expect(picture.rows.map(\.end) == [30, 10, 35])
  }

  @Test("a replay draws a bar that has not ended as running, and its legend names that colour")
  func replayRunningColour() {
    let picture = TimelinePicture(
      log: ["start 1 a", "start 2 b", "finish 2 b", "finish 1 a"],
      caption: "replay"
    )
    let player = picture.playerPage(title: "Lesson 3: `SerialQueue`", back: ("../03.md", "Back"))
    #expect(player.contains("data-running-fill=\"#1a73e8\""))
    #expect(player.contains("data-player-only=\"1\" data-legend=\"1\" fill=\"#1a73e8\""))
    #expect(!picture.svg().contains("data-player-only"))
    // The log's numbers are the list's own on the step axis.
    #expect(!player.contains("class=\"at\""))
  }
}

@Suite("TimelinePicture: jobs waiting in line, dropped, rolled back")
struct TimelinePictureWaitingTests {
  @Test("a job put in line waits apart until it starts; one dropped while waiting is one bar")
  func waitingAndDropped() {
    let picture = TimelinePicture(
      log: [
        "[  0 ms] start 1 search",
        "[ 40 ms] waiting 2 search",
        "[ 80 ms] dropped 2 search: replaced",
        "[ 80 ms] waiting 3 search",
        "[200 ms] finish 1 search: answered",
        "[200 ms] start 3 search",
        "[260 ms] finish 3 search: answered",
      ],
      caption: "coalescing"
    )
    #expect(picture.rows.map(\.label) == ["1 search", "2 search", "3 search"])
    // The run says the job was replaced, not cancelled: so do the bar and its legend.
    #expect(picture.rows.map(\.outcome) == [.finished, .replaced, .finished])
    #expect(picture.rows[1].start == 40 && picture.rows[1].end == 80)
    // It did no work: its time is a wait in line, then the mark of its replacement.
    #expect(picture.rows[1].segments.map(\.kind) == [.queued, .lastAttempt])
    #expect(picture.rows[1].segments.first?.end == 80)
    let kinds = picture.rows[2].segments.map(\.kind)
    #expect(kinds == [.queued, .lastAttempt])
    #expect(picture.rows[2].segments.first?.end == 200)
    let svg = picture.svg()
    #expect(svg.contains("waiting in line</text>"))
    #expect(svg.contains(">replaced</text>"))
    #expect(!svg.contains(">cancelled</text>"))
  }

  @Test("a cancelled job's rollback is a part of its bar of its own, named in the legend")
  func rollback() {
    let picture = TimelinePicture(
      log: [
        "[ 0 ms] started save #1",
        "[10 ms] started save #2",
        "[10 ms] rolling back save #1: cancelled by tap 2",
        "[20 ms] ended save #1: cancelled",
        "[40 ms] ended save #2: succeeded",
      ],
      caption: "rollback"
    )
    #expect(picture.rows.map(\.outcome) == [.cancelled, .finished])
    let parts = picture.rows[0].segments.map { ($0.kind, $0.start, $0.end) }
    #expect(parts.count == 2)
    #expect(parts.first?.0 == .lastAttempt && parts.first?.2 == 10)
    #expect(parts.last?.0 == .rollback && parts.last?.1 == 10 && parts.last?.2 == 20)
    #expect(picture.rows[1].segments.isEmpty)
    #expect(picture.svg().contains(">rolling back</text>"))
  }

  @Test(
    "a job suspended at an await is drawn in three parts: ran, suspended off the actor, ran; tried once"
  )
  func suspension() {
    let picture = TimelinePicture(
      log: [
        "[ 0 ms] start 1 slow",
        "[ 0 ms] suspended 1 slow: awaiting its call, off the actor",
        "[ 0 ms] start 2 quick",
        "[10 ms] finish 2 quick",
        "[50 ms] resumed 1 slow",
        "[60 ms] finish 1 slow",
      ],
      caption: "suspension"
    )
    #expect(picture.rows.map(\.outcome) == [.finished, .finished])
    let kinds = picture.rows[0].segments.map(\.kind)
    #expect(kinds == [.lastAttempt, .suspended, .lastAttempt])
    let suspended = picture.rows[0].segments.first { $0.kind == .suspended }
    #expect(suspended?.start == 0 && suspended?.end == 50)
    #expect(picture.rows[0].attempts == 1)
    #expect(picture.attemptsSummary.isEmpty)
    #expect(picture.svg().contains(">suspended, off the actor</text>"))
  }
}
