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
    "OrderlyRepository": "the repository layer: notes, NotesRepository, an in-memory service "
    "for tests",
    "OrderlySQLite": "notes on SQLite through GRDB, and the offline-first notes service",
    "OrderlyOutboxCore": "the outbox's vocabulary and the rules every store delivers by "
    "(envelopes, retries, dead letters, events, DurableOutbox)",
    "OrderlyOutbox": "ordered work that survives the process: an outbox on SQLite",
    "OrderlyServer": "a server process: the outbox as a ServiceLifecycle service, logs, "
    "metrics and traces (Server trait)",
    "OrderlyPostgres": "the outbox on PostgreSQL: per-key order across a fleet of workers, "
    "with fenced leases and failover (Postgres trait)",
    "OrderlyLaunch": "launch steps, one modal at a time",
    "OrderlyTaskStore": "keyed tasks, with a policy for a key already running",
}


def main():
    site, modules = sys.argv[1], sys.argv[2:]
    items = []
    for module in modules:
        href = "%s/documentation/%s/" % (module, module.lower())
        items.append(
            '<li class="card"><a href="%s">%s</a><p>%s</p></li>'
            % (href, module, html.escape(SUMMARIES.get(module, "")))
        )
    guides = []
    for path, label in [
        ("docs/course/README.html", "The course: ordering asynchronous work, lesson by lesson"),
        ("docs/examples.html", "The examples gallery: every runnable example"),
        ("docs/benchmarks.html", "Benchmarks: what Orderly costs, measured"),
    ]:
        if os.path.exists(os.path.join(site, path)):
            title, _, detail = label.partition(": ")
            guides.append(
                '<li class="card"><a href="%s">%s</a><p>%s</p></li>'
                % (path, html.escape(title), html.escape(detail))
            )
    with open(os.path.join(site, "index.html"), "w", encoding="utf-8") as f:
        f.write(
            """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Orderly documentation</title>
<style>
body { font: 16px/1.55 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial,
       sans-serif; max-width: 960px; margin: 0 auto; padding: 0 1rem 3rem; color: #1d1d1f; }
header { padding: 2.5rem 0 1.5rem; border-bottom: 1px solid #d2d2d7; margin-bottom: 1.5rem; }
header h1 { font-size: 2.4rem; margin: 0 0 .4rem; letter-spacing: -.02em; }
header p { font-size: 1.15rem; color: #424245; margin: 0; max-width: 46rem; }
h2 { font-size: 1.3rem; margin: 2rem 0 .8rem; }
ul.cards { list-style: none; padding: 0; margin: 0; display: grid; gap: .9rem;
           grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); }
li.card { border: 1px solid #d2d2d7; border-radius: 10px; padding: .9rem 1rem;
          background: #fbfbfd; }
li.card a { font-weight: 600; color: #0058b0; text-decoration: none; font-size: 1.05rem; }
li.card a:hover, li.card a:focus { text-decoration: underline; }
li.card p { margin: .35rem 0 0; color: #424245; font-size: .95rem; }
code { font: 14px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
</style>
</head><body>
<header>
<h1>Orderly</h1>
<p>Swift's <code>Task {}</code> calls start in no guaranteed order and actors are reentrant,
so asynchronous results come back shuffled. Orderly puts asynchronous work back in order, and
the course shows why each piece is needed.</p>
</header>
<main>
<h2>Learn</h2>
<ul class="cards">%s</ul>
<h2>Modules</h2>
<ul class="cards">%s</ul>
</main>
</body></html>
"""
            % ("\n".join(guides), "\n".join(items))
        )


if __name__ == "__main__":
    main()
