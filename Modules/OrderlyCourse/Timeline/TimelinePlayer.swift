import Foundation

extension TimelinePicture {
  /// A page that replays the run the picture was drawn from, one event at a time.
  ///
  /// The page holds the picture and the log; its behaviour and looks are two files beside it,
  /// `player.js` and `player.css` (in `docs/course/players/`), shared by every player of the
  /// folder. No server, no framework, nothing fetched from elsewhere. It opens on the first
  /// event; **Play** moves on every 700 milliseconds, **Step** and **Back** one event, the
  /// slider to any event, and the keyboard does the same (→ and ←, Space, Home and End). The
  /// current event's log line and its row are highlighted, each bar grows as far as the run had
  /// got, drawn as running until it ends (the legend has that colour), and a call's damage
  /// appears when it ends. The last frame is the static picture.
  ///
  /// - Parameters:
  ///   - title: The page's heading, as in `Lesson 13: An outbox`.
  ///   - back: Where the link under the player leads (the lesson), and its words. Opened from
  ///     a clone (`file:`), where that link would show raw Markdown, `player.js` goes back to
  ///     the page the learner came from instead, or, for a player opened on its own, names the
  ///     lesson's file.
  /// - Returns: The HTML text, ending with a newline.
  public func playerPage(title: String, back: (href: String, text: String)) -> String {
    let log = steps.enumerated().map { index, step in
      // On the step axis the list's own number is the step: no second number beside it.
      "<li id=\"step-\(index + 1)\" data-row=\"\(step.row)\">"
        + (unit == "step"
          ? "" : "<span class=\"at\">\(Self.placeOnAxis(step.position, unit: unit))</span> ")
        + "\(Self.escapedHTML(step.line))</li>"
    }
    let axis =
      unit == "step"
      ? "The picture's axis is the order of events: one step per line of the log."
      : "The picture's axis is the run's clock, in \(unit)."
    return """
      <!DOCTYPE html>
      <html lang="en"><head><meta charset="utf-8">
      <meta name="viewport" content="width=device-width, initial-scale=1">
      <title>Replay: \(Self.escapedHTML(title)) · Orderly</title>
      <link rel="stylesheet" href="player.css"></head>
      <body>
      <main>
      <h1>Replay: \(Self.escapedHTML(title))</h1>
      <p>\(Self.escapedHTML(fullCaption))</p>
      <p class="how">\(axis) Step through its \(steps.count) events with the buttons, the slider or \
      the keys: → and ← step, Space plays and pauses, Home and End go to the first and last.</p>
      <div class="controls" role="group" aria-label="Replay controls">
      <button id="play" type="button" aria-pressed="false">Play</button>
      <button id="back" type="button">◀ Back</button>
      <button id="step" type="button">Step ▶</button>
      <input id="slider" type="range" min="1" max="\(steps.count)" value="1" \
      aria-label="Event number">
      <output id="position" for="slider" aria-live="polite">event 1 of \(steps.count)</output>
      </div>
      <figure>
      \(svg(forPlayer: true).trimmingCharacters(in: .newlines))
      </figure>
      <h2>The activity log</h2>
      <ol id="log">
      \(log.joined(separator: "\n"))
      </ol>
      <p><a id="lesson-link" href="\(Self.escapedHTML(back.href))">\(Self.escapedHTML(back.text))</a>\
      <span id="lesson-note" hidden> (opened from a clone, the lesson is the Markdown file \
      \(Self.escapedHTML(back.href.replacingOccurrences(of: "../", with: "docs/course/"))): read \
      it in your editor, on the repository's web page, or on the documentation site)</span></p>
      </main>
      <script src="player.js"></script>
      </body></html>

      """
  }

  /// `300 ms`: where an event happened on a clock.
  private static func placeOnAxis(_ position: Double, unit: String) -> String {
    "\(number(position)) \(unit)"
  }

  private static func escapedHTML(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;")
      .replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;")
      .replacingOccurrences(of: "\"", with: "&quot;")
  }
}
