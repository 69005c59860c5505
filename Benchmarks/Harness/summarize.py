"""Tables for docs/benchmarks.md from the harness's runs: `python summarize.py RUNS`.

RUNS has one line per run, `LABEL<TAB>RESULTS_FOLDER` (Benchmarks/Scripts/harness.sh writes it);
each folder holds the harness's summary.json. Every figure is the harness's own: the median of
a phase's samples, and for the chaos scenarios the harness's recovery aggregates (recovery time:
from the end of the chaos phases until the completion rate is back at 90% of the baseline's
median; jobs lost: jobs enqueued minus jobs completed over the chaos and recovery phases, which
also counts what is still queued when the recovery phase ends).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SYSTEMS = ["orderly", "procrastinate", "awa-python"]
NAMES = {
    "orderly": "Orderly (ordered per key)",
    "procrastinate": "procrastinate 3.8.1",
    "awa-python": "awa-pg 0.6.9",
}


def median(summary: dict, system: str, phase: str, metric: str) -> float | None:
    block = summary["systems"].get(system, {}).get("phases", {}).get(phase, {})
    value = block.get("metrics", {}).get(metric, {}).get("median")
    return float(value) if value is not None else None


def peak_everywhere(summary: dict, system: str, metric: str) -> float | None:
    peaks = [
        block.get("metrics", {}).get(metric, {}).get("peak")
        for block in summary["systems"].get(system, {}).get("phases", {}).values()
    ]
    peaks = [float(p) for p in peaks if p is not None]
    return max(peaks) if peaks else None


def shown(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def main() -> None:
    runs: list[tuple[str, dict]] = []
    for line in Path(sys.argv[1]).read_text().splitlines():
        if not line.strip():
            continue
        label, folder = line.split("\t", 1)
        runs.append((label, json.loads((Path(folder) / "summary.json").read_text())))
    by_label = dict(runs)
    present = [s for s in SYSTEMS if any(s in summary["systems"] for _, summary in runs)]

    throughput = [(label, s) for label, s in runs if label.startswith("throughput ")]
    if throughput:
        workers = [label.split()[1] for label, _ in throughput]
        print(
            "Completion rate / enqueue rate (jobs/s, medians of the clean phase), offered 3,000"
            " jobs/s: where the two are equal the producer, not the workers, set the pace.\n"
        )
        print("| System | " + " | ".join(f"{w} workers" for w in workers) + " |")
        print("|---|" + "---:|" * len(workers))
        for system in present:
            cells = [
                shown(median(s, system, "clean_1", "completion_rate"))
                + " / "
                + shown(median(s, system, "clean_1", "enqueue_rate"))
                for _, s in throughput
            ]
            print(f"| {NAMES[system]} | " + " | ".join(cells) + " |")
        print()

    if "latency 16" in by_label:
        summary = by_label["latency 16"]
        print("Claim latency (insert to handler start), 16 workers, offered 800 jobs/s:\n")
        print("| System | claim p50 (ms) | claim p99 (ms) | completion rate (jobs/s) |")
        print("|---|---:|---:|---:|")
        for system in present:
            if system not in summary["systems"]:
                continue
            print(
                f"| {NAMES[system]} | {shown(median(summary, system, 'clean_1', 'claim_p50_ms'), 1)}"
                f" | {shown(median(summary, system, 'clean_1', 'claim_p99_ms'), 1)}"
                f" | {shown(median(summary, system, 'clean_1', 'completion_rate'))} |"
            )
        print()

    chaos = [(label.split()[1], s) for label, s in runs if label.startswith("chaos ")]
    if chaos:
        print("Chaos, 2 replicas x 16 workers, offered 800 jobs/s per replica:\n")
        print(
            "| Scenario | System | recovered | recovery time (s) | jobs lost (harness) |"
            " queued at the end | order violations |"
        )
        print("|---|---|---|---:|---:|---:|---:|")
        for scenario, summary in chaos:
            for system in present:
                if system not in summary["systems"]:
                    continue
                recovery = summary["systems"].get(system, {}).get("phases", {}).get("recovery", {})
                seconds = recovery.get("chaos_recovery_time_s")
                recovered = "yes" if seconds is not None else "no"
                lost = recovery.get("jobs_lost")
                violations = (
                    shown(peak_everywhere(summary, system, "order_violations"))
                    if system == "orderly"
                    else "not checked"
                )
                print(
                    f"| `chaos_{scenario}` | {NAMES[system]} | {recovered} | {shown(seconds, 1)}"
                    f" | {shown(lost)} | {shown(median(summary, system, 'recovery', 'queue_depth'))}"
                    f" | {violations} |"
                )
        print()


if __name__ == "__main__":
    main()
