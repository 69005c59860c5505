import Foundation

extension TimelinePicture {
  /// A page that replays the run the picture was drawn from, one event at a time.
  ///
  /// The page holds the picture and the log; its behaviour and looks are two files beside it,
  /// ``playerScript`` as `player.js` and ``playerStyle`` as `player.css`, shared by every
  /// player of a folder. No server, no framework, nothing fetched from elsewhere. It opens on the first event; **Play** moves on every
  /// ``playInterval`` milliseconds, **Step** and **Back** one event, the slider to any event,
  /// and the keyboard does the same (→ and ←, Space, Home and End). The current event's log
  /// line and its row are highlighted, each bar grows as far as the run had got, and a
  /// call's damage appears when it ends. The last frame is the static picture.
  ///
  /// - Parameters:
  ///   - title: The page's heading, as in `Lesson 9: the outbox`.
  ///   - back: Where the link under the player leads (the lesson), and its words.
  /// - Returns: The HTML text, ending with a newline.
  public func playerPage(title: String, back: (href: String, text: String)) -> String {
    let log = steps.enumerated().map { index, step in
      "<li id=\"step-\(index + 1)\" data-row=\"\(step.row)\">"
        + "<span class=\"at\">\(Self.placeOnAxis(step.position, unit: unit))</span> "
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
      <p><a href="\(Self.escapedHTML(back.href))">\(Self.escapedHTML(back.text))</a></p>
      </main>
      <script src="player.js"></script>
      </body></html>

      """
  }

  /// `300 ms`, or `#4` for a step.
  private static func placeOnAxis(_ position: Double, unit: String) -> String {
    unit == "step" ? "#\(number(position))" : "\(number(position)) \(unit)"
  }

  private static func escapedHTML(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;")
      .replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;")
      .replacingOccurrences(of: "\"", with: "&quot;")
  }

  /// How long Play shows each event, in milliseconds.
  public static let playInterval = 700

  /// The players' style sheet, `player.css` beside them.
  public static let playerStyle = """
    body { font-family: -apple-system, Helvetica, Arial, sans-serif; color: #1d1d1f; \
    margin: 0; background: #ffffff; }
    main { max-width: 1100px; margin: 0 auto; padding: 24px; }
    h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
    .how { color: #515154; }
    .controls { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin: 16px 0; }
    button { font: inherit; padding: 6px 14px; border: 1px solid #515154; border-radius: 6px; \
    background: #f5f5f7; color: #1d1d1f; cursor: pointer; }
    button:focus-visible, input:focus-visible { outline: 3px solid #0b57d0; outline-offset: 2px; }
    button:disabled { color: #6e6e73; cursor: default; }
    #slider { flex: 1; min-width: 160px; }
    figure { margin: 0; overflow-x: auto; }
    #log { font-family: Menlo, Consolas, monospace; font-size: 13px; padding-left: 3.5em; }
    #log li { padding: 2px 6px; color: #6e6e73; }
    #log li.done { color: #1d1d1f; }
    #log li.current { background: #fff4ce; outline: 1px solid #8a6100; color: #1d1d1f; }
    #log .at { display: inline-block; min-width: 5em; color: #515154; }
    """

  /// The players' script, `player.js` beside them: frames are computed from the picture's own
  /// attributes, so the last frame shows every shape as the static picture draws it.
  public static let playerScript = """
    (function () {
      var svg = document.getElementById("orderly-picture");
      var stepX = svg.getAttribute("data-step-x").split(" ").map(Number);
      var last = stepX.length;
      var top = Number(svg.getAttribute("data-top"));
      var rowHeight = Number(svg.getAttribute("data-row-height"));
      var bars = svg.querySelectorAll("[data-first]");
      var marks = svg.querySelectorAll("[data-show]");
      var highlight = document.getElementById("orderly-current-row");
      var lines = document.querySelectorAll("#log li");
      var slider = document.getElementById("slider");
      var position = document.getElementById("position");
      var play = document.getElementById("play");
      var back = document.getElementById("back");
      var step = document.getElementById("step");
      var current = 1;
      var timer = null;

      function show(frame) {
        current = Math.max(1, Math.min(last, frame));
        var x = stepX[current - 1];
        bars.forEach(function (bar) {
          var first = Number(bar.getAttribute("data-first"));
          var end = Number(bar.getAttribute("data-last"));
          var width = Number(bar.getAttribute("data-w"));
          if (current < first) { bar.setAttribute("visibility", "hidden"); return; }
          bar.removeAttribute("visibility");
          var reached = x - Number(bar.getAttribute("data-x"));
          var drawn = current >= end ? width : Math.max(3, Math.min(width, reached));
          bar.setAttribute("width", String(drawn));
        });
        marks.forEach(function (mark) {
          if (current >= Number(mark.getAttribute("data-show"))) mark.removeAttribute("visibility");
          else mark.setAttribute("visibility", "hidden");
        });
        lines.forEach(function (line, index) {
          line.classList.toggle("done", index < current);
          line.classList.toggle("current", index === current - 1);
          if (index === current - 1) line.setAttribute("aria-current", "step");
          else line.removeAttribute("aria-current");
        });
        var row = Number(lines[current - 1].getAttribute("data-row"));
        if (row >= 0) {
          highlight.setAttribute("y", String(top + row * rowHeight));
          highlight.removeAttribute("visibility");
        } else {
          highlight.setAttribute("visibility", "hidden");
        }
        slider.value = String(current);
        position.textContent = "event " + current + " of " + last;
        back.disabled = current === 1;
        step.disabled = current === last;
        if (current === last) stop();
      }
      function stop() {
        if (timer !== null) { clearInterval(timer); timer = null; }
        play.textContent = "Play";
        play.setAttribute("aria-pressed", "false");
      }
      function start() {
        if (current === last) show(1);
        play.textContent = "Pause";
        play.setAttribute("aria-pressed", "true");
        timer = setInterval(function () { show(current + 1); }, \(playInterval));
      }
      play.addEventListener("click", function () { if (timer === null) start(); else stop(); });
      back.addEventListener("click", function () { stop(); show(current - 1); });
      step.addEventListener("click", function () { stop(); show(current + 1); });
      slider.addEventListener("input", function () { stop(); show(Number(slider.value)); });
      document.addEventListener("keydown", function (event) {
        if (event.target === slider && event.key !== " ") return;
        var keys = { ArrowRight: current + 1, ArrowLeft: current - 1, Home: 1, End: last };
        if (event.key in keys) {
          event.preventDefault();
          stop();
          show(keys[event.key]);
        } else if (event.key === " " && event.target.tagName !== "BUTTON") {
          event.preventDefault();
          if (timer === null) start(); else stop();
        }
      });
      show(1);
    })();
    """
}
