#!/usr/bin/env python3
"""Checks the built documentation site in a real browser.

Usage: check.py SITE MODULE [MODULE ...]

1. Every local link and picture of the landing page and the rendered pages must resolve to a
   file of the site.
2. The site is served on loopback, and every landing page (the site's index, each module's
   documentation root, the course's contents, the examples gallery) is loaded in headless
   Chromium: it must render its title (DocC pages render in JavaScript, so an empty app means a
   broken page) and log no console error. A screenshot of each is saved in SITE/../screenshots.

   Headless Chromium prints console messages without their level and never reports a failed
   load, so the server adds a probe script to every page it serves: it records calls to
   console.error, uncaught errors and rejections, resources that fail to load and fetches that
   do not succeed, in an element of the page that the check reads back from the DOM.

3. Every run player of the course (docs/course/players/*.html) is loaded the same way, and a
   driver script the server adds to it works it as a reader would: → and ← step, End and Home
   jump, then Step is pressed until it is disabled. The player must open on its first event, answer
   every key, take one press per event, and end on the last; at every event, each bar must be
   drawn in a colour its legend names (or, for a key's holder, the holders' column); its
   picture's shapes at the end (each rect's and text's place, size, fill and visibility) must
   equal the static picture's (docs/course/pictures/NAME.svg), and no console error may occur.
4. Every link of a run player resolves in the repository as well (docs/course/players/*.html
   link to the lessons' Markdown pages, which the site renders as HTML).

Chromium comes from Debian's `chromium` package, installed when missing (as root, or through
sudo). Exits 1 naming each failure.
"""
import functools
import html
import html.parser
import json
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.targets.append(value)


PROBE = b"""<script>(function () {
  var seen = [];
  function show() {
    if (!document.body) return;
    var el = document.getElementById("orderly-check-errors");
    if (!el) { el = document.createElement("pre"); el.id = "orderly-check-errors";
      el.hidden = true; document.body.appendChild(el); }
    el.textContent = seen.join("\\n");
  }
  function note(message) { seen.push(String(message)); show(); }
  var error = console.error;
  console.error = function () {
    note("console.error: " + Array.prototype.join.call(arguments, " "));
    return error.apply(console, arguments);
  };
  window.addEventListener("error", function (event) {
    var target = event.target;
    if (target && target !== window) note("failed to load " + (target.src || target.href));
    else note("uncaught: " + event.message);
  }, true);
  window.addEventListener("unhandledrejection", function (event) {
    note("unhandled rejection: " + event.reason);
  });
  var fetchPage = window.fetch;
  window.fetch = function (resource) {
    return fetchPage.apply(this, arguments).then(function (response) {
      if (!response.ok) note("fetch " + response.status + " " + (response.url || resource));
      return response;
    });
  };
  document.addEventListener("DOMContentLoaded", show);
})();</script>"""


DRIVER = b"""<script>window.addEventListener("load", function () {
  var problems = [];
  var slider = document.getElementById("slider");
  var step = document.getElementById("step");
  var svg = document.getElementById("orderly-picture");
  var last = Number(slider.max);
  function at() { return Number(slider.value); }
  function key(name) {
    document.dispatchEvent(new KeyboardEvent("keydown", { key: name, bubbles: true }));
  }
  if (at() !== 1) problems.push("opened on event " + at() + ", not 1");
  var hiddenAtFirst = svg.querySelectorAll('[visibility="hidden"]').length;
  if (last > 1) {
    key("ArrowRight"); if (at() !== 2) problems.push("ArrowRight went to " + at() + ", not 2");
    key("ArrowLeft"); if (at() !== 1) problems.push("ArrowLeft went to " + at() + ", not 1");
  }
  key("End"); if (at() !== last) problems.push("End went to " + at() + ", not " + last);
  key("Home"); if (at() !== 1) problems.push("Home went to " + at() + ", not 1");
  // Every colour a bar is drawn in, at every event, must be named: by the legend's swatches,
  // or for a key's holder by the holders' column. A white bar is named by its dashed outline.
  var unnamed = {};
  // An outcome bar (one that ends finished, failed, ...) that has not ended yet must be drawn
  // in the colour the legend calls "running", not in the colour of how it will end.
  var runningFill = null;
  svg.querySelectorAll("[data-legend]").forEach(function (swatch) {
    var words = swatch.nextElementSibling;
    if (words && words.textContent === "running") runningFill = swatch.getAttribute("fill");
  });
  var early = false;
  function colours() {
    svg.querySelectorAll("rect[data-fill]").forEach(function (bar) {
      if (early || bar.getAttribute("visibility") === "hidden") return;
      if (at() < Number(bar.getAttribute("data-last")) && bar.getAttribute("fill") !== runningFill) {
        early = true;
        problems.push("at event " + at() + " a bar that has not ended is drawn in "
          + bar.getAttribute("fill") + ", not the legend's running colour " + runningFill);
      }
    });
    var named = {};
    svg.querySelectorAll("[data-legend], tspan").forEach(function (e) {
      named[e.getAttribute("fill") === "#ffffff"
        ? "outline " + e.getAttribute("stroke") : e.getAttribute("fill")] = true;
    });
    svg.querySelectorAll("rect[data-first]").forEach(function (bar) {
      if (bar.getAttribute("visibility") === "hidden") return;
      var fill = bar.getAttribute("fill");
      var colour = fill === "#ffffff" ? "outline " + bar.getAttribute("stroke") : fill;
      if (!named[colour] && !unnamed[colour]) {
        unnamed[colour] = true;
        problems.push("at event " + at() + " a bar is drawn in " + colour
          + ", which the legend does not name");
      }
    });
  }
  key("Home");
  colours();
  var presses = 0;
  while (!step.disabled && presses < 100000) { step.click(); presses += 1; colours(); }
  var current = document.querySelectorAll("#log li.current");
  var result = document.createElement("pre");
  result.id = "orderly-check-player";
  result.hidden = true;
  result.textContent = JSON.stringify({
    problems: problems, presses: presses, last: last, position: at(),
    hiddenAtFirst: hiddenAtFirst, currentLines: current.length,
    currentIsLast: current.length === 1 && current[0].id === "step-" + last
  });
  document.body.appendChild(result);
});</script>"""


def shapes(svg_text):
    """The drawn shapes of an SVG: each rect's and text's place, size, fill, visibility, words.

    The player's highlight of the current row and its legend entry for bars still running are
    not part of the static picture; `<title>`
    tooltips are left out (the DOM and the file spell their text alike anyway)."""
    drawn = []
    for match in re.finditer(r"<(rect|text|line)\b([^>]*?)/?>(?:([^<]*)</text>)?", svg_text):
        tag, attributes, words = match.group(1), match.group(2), match.group(3) or ""
        values = dict(re.findall(r'([a-zA-Z-]+)="([^"]*)"', attributes))
        if values.get("id") == "orderly-current-row" or 'data-player-only="1"' in attributes:
            continue
        kept = tuple(
            (name, values.get(name, ""))
            for name in ("x", "y", "width", "height", "fill", "x1", "x2", "y1", "y2", "visibility")
        )
        drawn.append((tag, kept, html.unescape(words.strip())))
    return drawn


def check_player(browser, base, site, path, failures):
    """Loads one run player, drives it to its end, and compares it with its static picture."""
    dom = browse(browser, base + path, ["--dump-dom"])
    problems = []
    if dom.returncode != 0:
        return ["chromium exited with %d" % dom.returncode]
    probe = re.search(r'<pre id="orderly-check-errors"[^>]*>(.*?)</pre>', dom.stdout, re.S)
    problems += [line for line in (probe.group(1).split("\n") if probe else []) if line]
    problems += [
        "console: " + line.strip()
        for line in dom.stderr.splitlines()
        if "CONSOLE" in line and re.search(r"error|uncaught|failed", line, re.I)
    ]
    found = re.search(r'<pre id="orderly-check-player"[^>]*>(.*?)</pre>', dom.stdout, re.S)
    if not found:
        return problems + ["the driver never finished (the player's script did not run?)"]
    result = json.loads(html.unescape(found.group(1)))
    problems += result["problems"]
    if result["presses"] != result["last"] - 1:
        problems.append("%d presses of Step for %d events" % (result["presses"], result["last"]))
    if result["position"] != result["last"]:
        problems.append("ended on event %d of %d" % (result["position"], result["last"]))
    if not result["currentIsLast"]:
        problems.append("the last log line is not the one highlighted at the end")
    # A title is plain text: Markdown's code marks would show as literal backticks.
    for heading in re.findall(r"<(?:h1|title)>(.*?)</(?:h1|title)>", dom.stdout, re.S):
        if "`" in heading:
            problems.append("its title shows literal backticks: %s" % html.unescape(heading))
    # On the step axis the list numbers the events already: a "#N" beside each is a second count.
    if re.search(r'<li id="step-\d+"[^>]*><span class="at">#', dom.stdout):
        problems.append("its log is numbered twice (the list's numbers and #N beside them)")
    figure = re.search(r"<svg\b.*?</svg>", dom.stdout, re.S)
    name = os.path.splitext(os.path.basename(path))[0]
    static_path = os.path.join(site, os.path.dirname(path), "..", "pictures", name + ".svg")
    with open(os.path.normpath(static_path), encoding="utf-8") as f:
        static = shapes(f.read())
    final = shapes(figure.group(0)) if figure else []
    if final != static:
        differing = [
            "%s %s" % (a[0], dict(a[1])) for a, b in zip(final, static) if a != b
        ][:3]
        problems.append(
            "its last frame differs from pictures/%s.svg (%d shapes against %d; first: %s)"
            % (name, len(final), len(static), "; ".join(differing) or "a shape is missing")
        )
    return problems


class ProbingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site, adding the probe script to every HTML page."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not path.endswith(".html") or not os.path.isfile(path):
            return super().do_GET()
        with open(path, "rb") as f:
            body = f.read()
        body = re.sub(rb"(<head[^>]*>)", lambda m: m.group(1) + PROBE, body, count=1)
        if "/players/" in path.replace(os.sep, "/"):
            body = body.replace(b"</body>", DRIVER + b"</body>", 1)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def local_links(site):
    """Yields (page, target, resolved path) for every local link of the non-DocC pages."""
    pages = [os.path.join(site, "index.html")]
    for root, _, files in os.walk(os.path.join(site, "docs")):
        pages += [os.path.join(root, f) for f in files if f.endswith(".html")]
    for page in pages:
        parser = Links()
        with open(page, encoding="utf-8") as f:
            parser.feed(f.read())
        for target in parser.targets:
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = urllib.parse.unquote(target.split("#")[0])
            if not path:
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
            if path.endswith("/") or os.path.isdir(resolved):
                resolved = os.path.join(resolved, "index.html")
            yield page, target, resolved


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    print("==> installing chromium (Debian's package)")
    prefix = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run(prefix + ["apt-get", "update", "-qq"], check=True)
    subprocess.run(
        prefix + ["apt-get", "install", "-y", "-qq", "chromium"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return shutil.which("chromium")


def browse(browser, url, extra):
    command = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=15000",
        "--window-size=1280,1000",
    ] + extra + [url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def main():
    site, modules = sys.argv[1], sys.argv[2:]
    failures = []

    for page, target, resolved in local_links(site):
        if not os.path.exists(resolved):
            failures.append("%s: broken link %s" % (os.path.relpath(page, site), target))

    landing = [("index.html", "Orderly puts asynchronous work back in order")]
    for module in modules:
        landing.append(("%s/documentation/%s/" % (module, module.lower()), module))
    for path, title in [("docs/course/README.html", None), ("docs/examples.html", None)]:
        if os.path.exists(os.path.join(site, path)):
            landing.append((path, title))

    handler = functools.partial(ProbingHandler, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d/" % server.server_address[1]
    shots = os.path.join(os.path.dirname(os.path.abspath(site)), "screenshots")
    os.makedirs(shots, exist_ok=True)

    browser = chromium()
    for path, title in landing:
        url = base + path
        dom = browse(browser, url, ["--dump-dom"])
        console = [
            line
            for line in dom.stderr.splitlines()
            if "CONSOLE" in line
            and re.search(r"error|uncaught|failed", line, re.I)
        ]
        probe = re.search(r'<pre id="orderly-check-errors"[^>]*>(.*?)</pre>', dom.stdout, re.S)
        recorded = [line for line in (probe.group(1).split("\n") if probe else []) if line]
        page_html = re.sub(r'<pre id="orderly-check-errors".*?</pre>', "", dom.stdout, flags=re.S)
        text = re.sub(r"<[^>]+>", " ", page_html)
        expected = title or ""
        if dom.returncode != 0:
            failures.append("%s: chromium exited with %d" % (path, dom.returncode))
        elif expected and expected not in text:
            failures.append("%s: did not render (no '%s' on the page)" % (path, expected))
        elif len(text.split()) < 20:
            failures.append("%s: rendered almost nothing" % path)
        for line in console:
            failures.append("%s: console: %s" % (path, line.strip()))
        for line in recorded:
            failures.append("%s: %s" % (path, line.strip()))
        name = re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-") or "index"
        shot = browse(browser, url, ["--screenshot=%s" % os.path.join(shots, name + ".png")])
        if shot.returncode != 0:
            failures.append("%s: no screenshot (chromium exited with %d)" % (path, shot.returncode))
        print("  %-55s %s" % (path, "ok" if not [f for f in failures if f.startswith(path)] else "FAILED"))

    players = sorted(
        os.path.relpath(os.path.join(root, f), site)
        for root, _, files in os.walk(os.path.join(site, "docs"))
        for f in files
        if f.endswith(".html") and os.path.basename(root) == "players"
    )
    if not players and os.path.isdir(os.path.join(site, "docs", "course")):
        failures.append("docs/course: no run player was copied into the site")
    for path in players:
        problems = check_player(browser, base, site, path, failures)
        failures += ["%s: %s" % (path, problem) for problem in problems]
        print("  %-55s %s" % (path, "FAILED" if problems else "ok (stepped to the end, as its picture)"))

    server.shutdown()
    # The players as the repository has them: a reader on GitHub follows their links too.
    repository = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    folder = os.path.join(repository, "docs", "course", "players")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".html"):
            continue
        parser = Links()
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            parser.feed(f.read())
        for target in parser.targets:
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(folder, target.split("#")[0]))):
                failures.append("docs/course/players/%s: broken link %s" % (name, target))

    if failures:
        print("site check failed:")
        for failure in failures:
            print("  " + failure)
        sys.exit(1)
    print(
        "site check passed: %d landing pages rendered, %d run players stepped through, "
        "screenshots in %s" % (len(landing), len(players), shots)
    )


if __name__ == "__main__":
    main()
