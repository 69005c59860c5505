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

Chromium comes from Debian's `chromium` package, installed when missing (as root, or through
sudo). Exits 1 naming each failure.
"""
import functools
import html.parser
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

    server.shutdown()
    if failures:
        print("site check failed:")
        for failure in failures:
            print("  " + failure)
        sys.exit(1)
    print("site check passed: %d landing pages rendered, screenshots in %s" % (len(landing), shots))


if __name__ == "__main__":
    main()
