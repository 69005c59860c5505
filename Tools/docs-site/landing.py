#!/usr/bin/env python3
"""Writes the site's landing page: the modules' documentation, the course, the examples.

Usage: landing.py SITE MODULE [MODULE ...]
"""
import html
import os
import sys

SUMMARIES = {
    "OrderlyCore": "the queues: SerialQueue, ConcurrentQueue, ActorQueue, MainActorQueue, "
    "KeyedSerialQueue, CoalescingQueue, AsyncSemaphore",
    "OrderlyTestSupport": "deterministic tests of order and time: Gate, OrderedRecorder, "
    "ManualClock",
    "OrderlyRepository": "the repository layer: notes, NotesRepository, the demo scenario",
    "OrderlySQLite": "notes on SQLite through GRDB, and the offline-first notes service",
    "OrderlyOutbox": "ordered work that survives the process: an outbox on SQLite",
    "OrderlyLaunch": "launch steps, one modal at a time",
    "OrderlyTaskStore": "keyed tasks, with a policy for a key already running",
}


def main():
    site, modules = sys.argv[1], sys.argv[2:]
    items = []
    for module in modules:
        href = "%s/documentation/%s/" % (module, module.lower())
        items.append(
            '<li><a href="%s">%s</a>: %s</li>'
            % (href, module, html.escape(SUMMARIES.get(module, "")))
        )
    guides = []
    for path, label in [
        ("docs/course/README.html", "The course: ordering asynchronous work, lesson by lesson"),
        ("docs/examples.html", "The examples gallery: every runnable example"),
        ("docs/benchmarks.html", "Benchmarks: what Orderly costs, measured"),
    ]:
        if os.path.exists(os.path.join(site, path)):
            guides.append('<li><a href="%s">%s</a></li>' % (path, html.escape(label)))
    with open(os.path.join(site, "index.html"), "w", encoding="utf-8") as f:
        f.write(
            """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Orderly documentation</title>
<style>body { font: 16px/1.55 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial,
sans-serif; max-width: 880px; margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; }</style>
</head><body>
<h1>Orderly documentation</h1>
<p>Swift's <code>Task {}</code> calls start in no guaranteed order and actors are reentrant,
so asynchronous results come back shuffled. Orderly puts asynchronous work back in order.</p>
<h2>Learn</h2>
<ul>%s</ul>
<h2>Modules</h2>
<ul>%s</ul>
</body></html>
"""
            % ("\n".join(guides), "\n".join(items))
        )


if __name__ == "__main__":
    main()
