"""Tables for docs/benchmarks.md from the matrix's runs:

    python summarize.py MATRIX.jsonl [ORDERLY_BUILD [EARLIER_BUILD]]


Each line of MATRIX.jsonl is one run of one cell for one system (Benchmarks/Harness/record.py
writes it; Benchmarks/Scripts/harness.sh runs the matrix). A cell run several times shows the
median of its runs and, in brackets, the lowest and highest. Every rate and latency is the
harness's own: the median of a phase's 5-second samples; for the chaos scenarios its recovery
aggregates (recovery time: from the end of the chaos phases until the completion rate is back at
90% of the baseline's median; `jobs_lost`: jobs enqueued minus jobs completed over the chaos and
recovery phases, integrated from its rate samples, which is how much the backlog grew, not a
count of lost jobs). Beside them, from Benchmarks/Harness/run.py's check after each cell: the
jobs that never completed after a final drain, counted in the database, and the order check
over every replica's deliveries together (Orderly: its audit trail; procrastinate: its jobs and
events tables; awa: its handlers' delivery logs).

An Orderly cell with no run on ORDERLY_BUILD shows its runs on EARLIER_BUILD (when given and
run), else on the build that ran it last, marked with that build: every figure names the build
it is of, so a change that cannot move a cell needs no new run of it (CONTRIBUTING.md).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

SYSTEMS = [
    "orderly-b1",
    "orderly-b16",
    "orderly",
    "procrastinate-ordered",
    "procrastinate",
    "awa-python-ordered",
    "awa-python",
]
NAMES = {
    "orderly-b1": "Orderly, one at a time (ordered per key)",
    "orderly-b16": "Orderly, batches of 16 (ordered per key)",
    "orderly": "Orderly (ordered per key)",
    "procrastinate-ordered": "procrastinate 3.8.1, `lock` per key (ordered)",
    "procrastinate": "procrastinate 3.8.1 (unordered)",
    "awa-python-ordered": "awa-pg 0.6.9, `ordering_key` per key (ordered)",
    "awa-python": "awa-pg 0.6.9 (unordered)",
}
ORDERED = {"orderly-b1", "orderly-b16", "orderly", "procrastinate-ordered", "awa-python-ordered"}
THROUGHPUT = ["throughput-4", "throughput-16", "throughput-64"]
CHAOS = [
    "chaos_crash_recovery",
    "chaos_repeated_kills",
    "chaos_pg_backend_kill",
    "chaos_postgres_restart",
    "chaos_pool_exhaustion",
]


# Orderly's (cell, system) pairs shown from the earlier build, by `load`.
EARLIER: dict[tuple[str, str], str] = {}


def load(
    path: str, build: str | None, earlier: str | None = None
) -> dict[tuple[str, str], list[dict]]:
    """The runs by (cell, system); a run recorded twice counts once, the later one.

    Orderly's runs of a cell are those of one build: `build` (the last commit that changed the
    code a harness cell can move: Benchmarks/Scripts/harness.sh passes it) when the cell has runs
    on it; otherwise those of `earlier`, if given and run; otherwise those of the build that ran
    the cell last. A cell shown from another build than `build` is noted in EARLIER, and its
    tables name that build: a figure always says which build it is of, so a change that cannot
    move a cell needs no new run of it. The peers' runs do not depend on Orderly's build.
    """
    latest: dict[tuple[str, str, int], dict] = {}
    by_build: dict[tuple[str, str], dict[str, dict[int, dict]]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            key = (record["cell"], record["system"], record["run"])
            if build is not None and record["system"].startswith("orderly"):
                made = str(record.get("orderly_build"))
                runs = by_build.setdefault((record["cell"], record["system"]), {})
                # Re-inserted, so that the dictionary's last key is the build that ran last.
                runs[made] = {**runs.pop(made, {}), record["run"]: record}
                continue
            latest[key] = record
    cells: dict[tuple[str, str], list[dict]] = {}
    for (cell, system, _), record in sorted(latest.items()):
        cells.setdefault((cell, system), []).append(record)
    for (cell, system), runs in sorted(by_build.items()):
        chosen = build if build in runs else earlier if earlier in runs else list(runs)[-1]
        if chosen != build:
            EARLIER[(cell, system)] = chosen
        cells[(cell, system)] = [runs[chosen][run] for run in sorted(runs[chosen])]
    return cells


def label(cell: str, system: str) -> str:
    """The system's name, with the build its runs of `cell` were made on when earlier."""
    made = EARLIER.get((cell, system))
    return NAMES[system] + (f", build {made}" if made else "")


def figure(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def spread(values: list[float | None], digits: int = 0) -> str:
    """The median of the runs, and (with more than one) the lowest and highest."""
    known = [v for v in values if v is not None]
    if not known:
        return "–"
    middle = figure(statistics.median(known), digits)
    if len(known) == 1:
        return middle
    return f"{middle} ({figure(min(known), digits)}–{figure(max(known), digits)})"


def phase(record: dict, name: str, metric: str) -> float | None:
    value = record.get("phases", {}).get(name, {}).get(metric)
    return float(value) if value is not None else None


def never_completed(runs: list[dict]) -> str:
    counts = [r.get("final", {}).get("never_completed") for r in runs]
    if not runs or any(c is None for c in counts):
        return "not counted"
    worst = max(counts)
    cut = [r for r in runs if r["final"]["drain_seconds"] >= r["final"]["drain_limit_seconds"]]
    text = f"{worst:,}" if len(runs) == 1 else f"{worst:,} (worst of {len(runs)})"
    return text + (" (drain cut short)" if cut and worst else "")


def order(system: str, runs: list[dict]) -> str:
    """The order check over every replica's deliveries, summed over the runs."""
    found: dict[str, int] = {}
    checked = 0
    for run in runs:
        final = run.get("final", {})
        audit = final.get("check", {}).get("audit")
        if audit is not None:
            checked += audit["attempts"]
            for kind, count in audit["violations"].items():
                found[kind] = found.get(kind, 0) + count
        elif "order" in final:
            checked += final["order"]["runs"]
            found["out of order"] = found.get("out of order", 0) + final["order"]["out_of_order"]
            found["overlaps"] = found.get("overlaps", 0) + final["order"]["overlaps"]
        else:
            return "not checked"
    wrong = {kind: count for kind, count in found.items() if count}
    if not wrong:
        return f"0 violations ({checked:,} deliveries)"
    listed = ", ".join(f"{count:,} {kind}" for kind, count in sorted(wrong.items()))
    return listed if system in ORDERED else f"{listed} (unordered)"


def main() -> None:
    if len(sys.argv) not in (2, 3, 4):
        sys.exit("usage: python summarize.py MATRIX.jsonl [ORDERLY_BUILD [EARLIER_BUILD]]")
    build = sys.argv[2] if len(sys.argv) >= 3 else None
    earlier = sys.argv[3] if len(sys.argv) == 4 else None
    cells = load(sys.argv[1], build, earlier)
    if build is not None:
        print(
            f"Orderly's cells: build {build} (a build is named by the last commit that had"
            " changed the code a cell can move: the PostgreSQL store, the delivery engine, the"
            " adapter)",
            end="",
        )
        if EARLIER:
            print("; a cell not run on it shows the build it was run on, and says so", end="")
        print(".\n")
    systems = [s for s in SYSTEMS if any(system == s for _, system in cells)]

    shown = [c for c in THROUGHPUT if any((c, s) in cells for s in systems)]
    if shown:
        print(
            "Throughput: completion rate (jobs/s, median of the clean phase), the harness's"
            " depth-target method (the queue kept about 4,000 deep), one replica; then the"
            " enqueue rate and the queue's median depth (jobs waiting), to show whether the"
            " producer was the ceiling: a depth well under 4,000 means the workers emptied the"
            " queue faster than the producer filled it, so the completion rate is the"
            " producer's pace on this machine, not the workers' capacity:\n"
        )
        print("| System | " + " | ".join(f"{c.split('-')[1]} workers" for c in shown) + " |")
        print("|---|" + "---:|" * len(shown))
        for system in systems:
            row = []
            for cell in shown:
                runs = cells.get((cell, system), [])
                completed = [phase(r, "clean_1", "completion_rate") for r in runs]
                enqueued = [phase(r, "clean_1", "enqueue_rate") for r in runs]
                depth = [phase(r, "clean_1", "queue_depth") for r in runs]
                made = EARLIER.get((cell, system))
                row.append(
                    f"{spread(completed)} / {spread(enqueued)}, depth {spread(depth)}"
                    + (f" (build {made})" if made else "")
                    if runs
                    else "–"
                )
            print(f"| {NAMES[system]} | " + " | ".join(row) + " |")
        print()

    if any(("latency-16", s) in cells for s in systems):
        print("Claim latency (insert to handler start), 16 workers, offered 200 jobs/s:\n")
        print("| System | claim p50 (ms) | claim p99 (ms) | completion rate (jobs/s) |")
        print("|---|---:|---:|---:|")
        for system in systems:
            runs = cells.get(("latency-16", system), [])
            if not runs:
                continue
            print(
                f"| {label('latency-16', system)}"
                f" | {spread([phase(r, 'clean_1', 'claim_p50_ms') for r in runs], 1)}"
                f" | {spread([phase(r, 'clean_1', 'claim_p99_ms') for r in runs], 1)}"
                f" | {spread([phase(r, 'clean_1', 'completion_rate') for r in runs])} |"
            )
        print()

    shown = [c for c in CHAOS if any((c, s) in cells for s in systems)]
    if shown:
        print(
            "Chaos, 2 replicas x 16 workers, each offered 600 jobs/s (1,200 in all); the"
            " baseline phase's completion rate and claim p50 before the chaos, for scale:\n"
        )
        print(
            "| Scenario | System | baseline (jobs/s) | baseline claim p50 (ms) | recovered"
            " | recovery time (s) | backlog growth (the harness's `jobs_lost` estimate)"
            " | queued at the end |"
        )
        print("|---|---|---:|---:|---|---:|---:|---:|")
        for cell in shown:
            for system in systems:
                runs = cells.get((cell, system), [])
                if not runs:
                    continue
                times = [phase(r, "recovery", "chaos_recovery_time_s") for r in runs]
                recovered = sum(1 for t in times if t is not None)
                print(
                    f"| `{cell}` | {label(cell, system)}"
                    f" | {spread([phase(r, 'baseline', 'completion_rate') for r in runs])}"
                    f" | {spread([phase(r, 'baseline', 'claim_p50_ms') for r in runs])}"
                    f" | {recovered} of {len(runs)}"
                    f" | {spread(times, 1)}"
                    f" | {spread([phase(r, 'recovery', 'jobs_lost') for r in runs])}"
                    f" | {spread([phase(r, 'recovery', 'queue_depth') for r in runs])} |"
                )
        print()

    print(
        "After each cell: the jobs that never completed once a replica that produces nothing"
        " drained the backlog (counted in the database; the worst run), and the order check"
        " over every replica's deliveries together (summed over the runs):\n"
    )
    print("| Cell | System | runs | never completed | order check |")
    print("|---|---|---:|---:|---|")
    for cell in THROUGHPUT + ["latency-16"] + CHAOS:
        for system in systems:
            runs = cells.get((cell, system), [])
            if runs:
                print(
                    f"| {cell} | {label(cell, system)} | {len(runs)} | {never_completed(runs)}"
                    f" | {order(system, runs)} |"
                )
    print()


if __name__ == "__main__":
    main()
