"""One line of Benchmarks/Harness/results/matrix.jsonl from a finished harness run:

    python record.py RESULTS_FOLDER CELL SYSTEM RUN ORDERLY_COMMIT HARNESS_COMMIT ORDERLY_BUILD

ORDERLY_BUILD is the last commit that changed Orderly's code (an Orderly run counts only
with the others of its build; see summarize.py).

From the run's summary.json (the harness's own figures): per phase, the medians of the
completion and enqueue rates, the claim latency's p50 and p99 and the queue depth; for a chaos
scenario, the recovery phase's `chaos_recovery_time_s` and `jobs_lost`. From final-SYSTEM.json
(Benchmarks/Harness/run.py): the final drain, what never completed, and the order check.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

METRICS = ["completion_rate", "enqueue_rate", "claim_p50_ms", "claim_p99_ms", "queue_depth"]


def main() -> None:
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    folder, cell, system, run, orderly, harness, build = sys.argv[1:]
    summary = json.loads((Path(folder) / "summary.json").read_text())
    phases = summary.get("systems", {}).get(system, {}).get("phases", {})
    if not phases:
        sys.exit(f"record.py: {folder}/summary.json has no phases for {system}")
    record: dict = {
        "cell": cell,
        "system": system,
        "run": int(run),
        "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "orderly_commit": orderly,
        "orderly_build": build,
        "harness_commit": harness,
        "folder": Path(folder).name,
        "phases": {},
    }
    for name, block in phases.items():
        metrics = block.get("metrics", {})
        record["phases"][name] = {
            metric: metrics[metric].get("median") for metric in METRICS if metric in metrics
        }
        for key in ("chaos_recovery_time_s", "jobs_lost"):
            if key in block:
                record["phases"][name][key] = block[key]
    final = Path(folder) / f"final-{system}.json"
    if final.exists():
        record["final"] = json.loads(final.read_text())
    print(json.dumps(record, sort_keys=True))


if __name__ == "__main__":
    main()
