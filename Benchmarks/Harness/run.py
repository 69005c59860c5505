"""Runs the benchmark harness (hardbyte/postgresql-job-queue-benchmarking) with Orderly's
adapter, and the procrastinate and awa adapters as native processes instead of Docker images.

    HARNESS_DIR=/path/to/harness ORDERLY_ADAPTER=/path/to/harness-adapter \
      python run.py run --systems orderly-b1,procrastinate-ordered --scenario ...

Everything after the script's name goes to the harness's own command line (`bench.py`).
Benchmarks/Scripts/harness.sh sets the environment and runs the matrix.

The harness is not changed: its adapter registry gets native entries (`VARIANTS` below) before
its `main` runs. `orderly-b1` and `orderly-b16` are this folder's adapter (a Swift executable)
delivering one message at a time and in ordered batches of up to 16; `procrastinate` is the
harness's own `procrastinate-bench/main.py`, run by the virtual environment's Python, and
`procrastinate-ordered` the same with procrastinate's `lock` set to each job's key;
`awa-python` is `awa-python-bench/main.py` here (the harness names the variant but ships no
adapter for it at the commit used), and `awa-python-ordered` the same with awa's
`ordering_key`.

After each system's cell (its replicas stopped, its database still there), `final_check` drains
what is left and records what the harness cannot see: one replica started again with nothing to
produce delivers the backlog (bounded by ORDERLY_DRAIN_SECONDS, 300 by default), then the jobs
that never completed are counted exactly in the database and, for Orderly, every replica's
deliveries are checked together through the audit trail (`harness-adapter check`). The result
is `final-<system>.json` in the run's folder, beside the harness's `summary.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = Path(os.environ["HARNESS_DIR"]).resolve()
sys.path.insert(0, str(HARNESS))

from bench_harness import adapters  # noqa: E402
from bench_harness.adapters import AdapterEntry, LaunchSpec, _base_env  # noqa: E402


def _nothing_to_build(skip: bool) -> None:
    return None


def _python(script: Path, extra: dict[str, str]):
    def launch(manifest, overrides) -> LaunchSpec:
        return LaunchSpec(
            argv=[sys.executable, str(script)], env={**_base_env(manifest, overrides), **extra}
        )

    return launch


def _orderly(extra: dict[str, str]):
    def launch(manifest, overrides) -> LaunchSpec:
        return LaunchSpec(
            argv=[os.environ["ORDERLY_ADAPTER"]], env={**_base_env(manifest, overrides), **extra}
        )

    return launch


PROCRASTINATE = HARNESS / "procrastinate-bench"
# The systems a run can name: each variant is a system of its own to the harness (its own
# rows), on its adapter's database, started fresh for it. `base` names the queue underneath.
VARIANTS = {
    # One message per delivery, acknowledged one at a time, as the peers do.
    "orderly-b1": ("orderly", HERE, _orderly({"ORDERLY_BATCH": "1"})),
    # Ordered batches: up to 16 consecutive messages of a key per delivery, one acknowledgement.
    "orderly-b16": ("orderly", HERE, _orderly({"ORDERLY_BATCH": "16"})),
    # ORDERLY_BATCH from the environment (1 unless set): the name earlier runs used.
    "orderly": ("orderly", HERE, _orderly({})),
    # The harness's own adapter, unordered.
    "procrastinate": ("procrastinate", PROCRASTINATE, _python(PROCRASTINATE / "main.py", {})),
    # The same adapter, every job deferred with procrastinate's `lock` set to its key.
    "procrastinate-ordered": (
        "procrastinate",
        PROCRASTINATE,
        _python(HERE / "procrastinate-ordered" / "main.py", {}),
    ),
    # awa through its Python SDK, unordered (no ordering key).
    "awa-python": (
        "awa-python",
        HERE / "awa-python-bench",
        _python(HERE / "awa-python-bench" / "main.py", {"AWA_ORDERED": "0"}),
    ),
    # The same adapter, every job inserted with awa's `ordering_key` set to its key.
    "awa-python-ordered": (
        "awa-python",
        HERE / "awa-python-bench",
        _python(HERE / "awa-python-bench" / "main.py", {"AWA_ORDERED": "1"}),
    ),
}
for name, (_, folder, launcher) in VARIANTS.items():
    adapters.ADAPTERS[name] = AdapterEntry(
        bench_dir=folder, builder=_nothing_to_build, launcher=launcher
    )

from bench_harness import orchestrator  # noqa: E402
from bench_harness.adapters import AdapterManifest, pg_url  # noqa: E402
from bench_harness.orchestrator import main  # noqa: E402

# Per system: the jobs that have not completed (still to run, running, failed or set aside),
# counted in its own tables.
UNFINISHED = {
    # Waiting or being delivered, and set aside as dead letters.
    "orderly": "SELECT (SELECT count(*) FROM orderly_outbox_message)"
    " + (SELECT count(*) FROM orderly_outbox_dead_letter)",
    # Every job not succeeded (its adapter keeps finished jobs: delete_jobs="never").
    "procrastinate": "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'",
    # awa's queue storage keeps its waiting jobs where no query of ours reads them (its `jobs`
    # view shows none while workers run, and takes seconds): the jobs its producers inserted
    # whose handler never finished, from the adapter's logs (`_awa_unfinished`).
    "awa-python": None,
}

# procrastinate's order, from its own tables: a job's key is its `seq` modulo BENCH_KEYS (what
# the ordered variant locks on), its place in its key's order its id (the order it was
# deferred in), its run the first `started` and last `succeeded` event.
PROCRASTINATE_ORDER = """
WITH runs AS (
  SELECT j.id, (j.args->>'seq')::bigint %% %(keys)s AS key,
         min(e.at) FILTER (WHERE e.type = 'started') AS started,
         max(e.at) FILTER (WHERE e.type = 'succeeded') AS ended
  FROM procrastinate_jobs j JOIN procrastinate_events e ON e.job_id = j.id
  GROUP BY j.id
), checked AS (
  SELECT started,
         max(started) OVER (PARTITION BY key ORDER BY id
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_start,
         lag(ended) OVER (PARTITION BY key ORDER BY started, id) AS previous_end
  FROM runs WHERE started IS NOT NULL
)
SELECT count(*),
       count(*) FILTER (WHERE started < earlier_start),
       count(*) FILTER (WHERE started < previous_end)
FROM checked
"""


def _awa_logs(folder: Path) -> tuple[set[tuple[str, int]], list[list[str]]] | None:
    """What awa's adapter wrote to ORDER_LOG_DIR: the jobs its producers inserted (producer,
    seq), and its handlers' runs (key, producer, seq, start, end; a line cut by a SIGKILL is
    left out)."""
    if not folder.is_dir():
        return None
    inserted: set[tuple[str, int]] = set()
    runs: list[list[str]] = []
    for path in sorted(folder.glob("awa-*.log")):
        enqueued = path.name.startswith("awa-enqueued-")
        for line in path.read_text().splitlines():
            parts = line.split(",")
            if enqueued and len(parts) == 4 and parts[0] == "E":
                first, count = int(parts[2]), int(parts[3])
                inserted.update((parts[1], seq) for seq in range(first, first + count))
            elif not enqueued and len(parts) == 5:
                runs.append(parts)
    return inserted, runs


def _order_from_log(folder: Path) -> dict | None:
    """Every replica's handler runs together: per key, a job that started before one its
    producer made earlier had started is out of order; a run that started before the run of
    its key that started just before it ended overlaps it."""
    logs = _awa_logs(folder)
    if logs is None:
        return None
    runs: dict[str, list[tuple[int, int, str, int]]] = {}
    for key, producer, seq, started, ended in logs[1]:
        runs.setdefault(key, []).append((int(started), int(ended), producer, int(seq)))
    checked = out_of_order = overlaps = 0
    for key_runs in runs.values():
        key_runs.sort()
        latest: dict[str, int] = {}
        previous_end = None
        for started, ended, producer, seq in key_runs:
            checked += 1
            if seq < latest.get(producer, -1):
                out_of_order += 1
            latest[producer] = max(seq, latest.get(producer, -1))
            if previous_end is not None and started < previous_end:
                overlaps += 1
            previous_end = ended if previous_end is None else max(previous_end, ended)
    return {"runs": checked, "out_of_order": out_of_order, "overlaps": overlaps}


def _order_check(url: str, system: str, run_id: str) -> dict | None:
    base = VARIANTS[system][0]
    if base == "awa-python":
        return _order_from_log(orchestrator.RESULTS_ROOT / run_id / f"order-log-{system}")
    if base != "procrastinate":
        return None
    import psycopg

    keys = int(os.environ.get("BENCH_KEYS") or "1000")
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(PROCRASTINATE_ORDER, {"keys": keys}).fetchone()
    except psycopg.Error as error:
        print(f"[orderly-run] {system}'s order check failed: {error}", file=sys.stderr)
        return None
    return {"runs": row[0], "out_of_order": row[1], "overlaps": row[2]}


def _awa_unfinished(folder: Path) -> int | None:
    """The jobs awa's producers inserted whose handler never finished (the handlers' logs are
    written before a job completes)."""
    logs = _awa_logs(folder)
    if logs is None:
        return None
    inserted, runs = logs
    return len(inserted - {(producer, int(seq)) for _, producer, seq, _, _ in runs})


def _unfinished(url: str, system: str, run_id: str) -> int | None:
    if VARIANTS[system][0] == "awa-python":
        return _awa_unfinished(orchestrator.RESULTS_ROOT / run_id / f"order-log-{system}")
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(UNFINISHED[VARIANTS[system][0]]).fetchone()
            return int(row[0]) if row else None
    except psycopg.Error as error:
        print(f"[orderly-run] counting {system}'s unfinished jobs failed: {error}", file=sys.stderr)
        return None


def final_check(system: str, run_id: str, worker_count: int) -> None:
    """Drains the cell's backlog with one replica that produces nothing, counts what never
    completed, and (Orderly) audits the whole trail; writes final-<system>.json."""
    base = VARIANTS[system][0] if system in VARIANTS else None
    if base not in UNFINISHED:
        return
    entry = adapters.ADAPTERS[system]
    manifest = AdapterManifest.load(entry.bench_dir)
    url = pg_url(manifest.db_name)
    overrides = {
        "PRODUCER_RATE": "0",
        "PRODUCER_MODE": "fixed",
        "WORKER_COUNT": str(worker_count),
        "BENCH_INSTANCE_ID": "0",
    }
    spec = entry.launcher(manifest, overrides)
    env = {**os.environ, **spec.env}
    limit = float(os.environ.get("ORDERLY_DRAIN_SECONDS", "300"))
    before = _unfinished(url, system, run_id)
    started = time.monotonic()
    # stdin closed: a harness-paced producer gets no tokens and appends nothing.
    drain = subprocess.Popen(
        spec.argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=sys.stderr,
    )
    left = before
    empty_looks = 0
    try:
        while time.monotonic() - started < limit and drain.poll() is None:
            time.sleep(1)
            left = _unfinished(url, system, run_id)
            # Twice empty in a row: nothing came back from a lease that ended meanwhile.
            empty_looks = empty_looks + 1 if left == 0 else 0
            if empty_looks >= 2:
                break
    finally:
        drain.terminate()
        try:
            drain.wait(timeout=20)
        except subprocess.TimeoutExpired:
            drain.kill()
            drain.wait()
    drained_in = time.monotonic() - started
    record: dict = {
        "system": system,
        "unfinished_before_drain": before,
        "drain_seconds": round(drained_in, 1),
        "drain_limit_seconds": limit,
        "never_completed": _unfinished(url, system, run_id),
    }
    order = _order_check(url, system, run_id)
    if order is not None:
        record["order"] = order
    if base == "orderly":
        checked = subprocess.run(
            [os.environ["ORDERLY_ADAPTER"], "check"],
            env={**os.environ, "DATABASE_URL": url},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if checked.returncode == 0 and checked.stdout.strip():
            record["check"] = json.loads(checked.stdout.strip().splitlines()[-1])
        else:
            record["check_error"] = (checked.stderr or "no report")[-2000:]
    path = orchestrator.RESULTS_ROOT / run_id / f"final-{system}.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"[orderly-run] {system}: {json.dumps(record, sort_keys=True)}", file=sys.stderr)


_run_one_system = orchestrator.run_one_system


def run_one_system_then_check(system: str, **kwargs):
    # The harness writes its pacing tokens to every replica's standard input unless told the
    # adapter paces itself. procrastinate's and awa's adapters pace themselves and never read
    # it: once the pipe is full the harness's pacer blocks on the write, and its stop of the
    # replica then waits on that write for ever (a 180-second phase at 200 jobs/s fills it).
    os.environ["PRODUCER_PACING"] = "harness" if VARIANTS[system][0] == "orderly" else "adapter"
    # awa's replicas (and its drain) write every handler run here, for the order check.
    os.environ["ORDER_LOG_DIR"] = str(orchestrator.RESULTS_ROOT / kwargs["run_id"] / f"order-log-{system}")
    descriptor = _run_one_system(system, **kwargs)
    final_check(system, kwargs["run_id"], kwargs["worker_count"])
    return descriptor


orchestrator.run_one_system = run_one_system_then_check

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
