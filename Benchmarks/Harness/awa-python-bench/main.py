#!/usr/bin/env python3
"""The awa peer (Python SDK, `awa-pg` from PyPI) for the benchmark harness, as native processes.

The harness (hardbyte/postgresql-job-queue-benchmarking) registers an `awa-python` variant but
ships no adapter for it at the commit Orderly uses; this one speaks the harness's JSONL protocol
(CONTRIBUTING_ADAPTERS.md there) the way its procrastinate adapter does: `WORKER_COUNT` workers
on one queue, claim latency (insert to handler start) over 30 seconds, enqueue and completion
rates, and the queue depth (the jobs this replica inserted and has not completed).

The producer runs in a process of its own (its own event loop and connections), so the
handlers' loop never slows it: at a fixed rate (PRODUCER_RATE, credited on real elapsed time,
following the harness's control file in its high-load phases) or keeping the queue about
TARGET_DEPTH deep (PRODUCER_MODE=depth-target), in batches of up to PRODUCER_BATCH_MAX through
awa's COPY path (`insert_many_copy`).

Job `seq` of a producer has the key `seq % BENCH_KEYS` (1,000 unless set), round robin, as
Orderly's adapter spreads its messages. AWA_ORDERED=1 inserts every job with awa's
`ordering_key` set to its key (per job, in the same COPY); 0, the default: no ordering key.

With ORDER_LOG_DIR set, every handler run is written there before it returns (one file per
process: key, producer, seq, start and end in microseconds), and every batch the producer
inserted (`E,producer,first seq,count`), for Benchmarks/Harness/run.py's order check over every
replica's deliveries together and its count of jobs that never completed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlparse

import awa

QUEUE = "awa_longhorizon_bench"


def env_int(key: str, default: int, minimum: int = 0) -> int:
    value = os.environ.get(key)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        sys.exit(f"awa-python-bench: {key} must be a whole number (got {value!r})")
    if number < minimum:
        sys.exit(f"awa-python-bench: {key} must be {minimum} or more (got {number})")
    return number


def instance_id() -> int:
    return env_int("BENCH_INSTANCE_ID", 0)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def emit(record: dict) -> None:
    record.setdefault("instance_id", instance_id())
    print(json.dumps(record), flush=True)


def producer_rate(default: int) -> float:
    path = os.environ.get("PRODUCER_RATE_CONTROL_FILE")
    if not path:
        return float(default)
    try:
        with open(path) as fh:
            return float(fh.read().strip())
    except (OSError, ValueError):
        return float(default)


@dataclass
class BenchJob:
    seq: int
    key: int
    producer: str
    created_ms: float
    padding: str = ""


def end_with_parent(parent: int) -> None:
    """The producer ends when its replica does, SIGKILL included (the harness's chaos kills the
    replica's process only): Linux's PR_SET_PDEATHSIG, and a look at the parent each batch."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def produce(url: str, parent: int, enqueued, depth, stop) -> None:
    """The producer process: inserts until `stop` is set or its replica is gone, counting into
    `enqueued`."""
    end_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    mode = os.environ.get("PRODUCER_MODE") or "fixed"
    rate = env_int("PRODUCER_RATE", 800)
    target = env_int("TARGET_DEPTH", 1000)
    batch_max = env_int("PRODUCER_BATCH_MAX", 128, minimum=1)
    batch_ms = env_int("PRODUCER_BATCH_MS", 25, minimum=1)
    keys = env_int("BENCH_KEYS", 1000, minimum=1)
    ordered = os.environ.get("AWA_ORDERED", "0") == "1"
    padding = "x" * max(0, env_int("JOB_PAYLOAD_BYTES", 256) - 64)
    name = f"{instance_id()}-{os.getpid()}"
    log_dir = os.environ.get("ORDER_LOG_DIR")
    log = None
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        log = open(os.path.join(log_dir, f"awa-enqueued-{name}.log"), "a", buffering=1)

    async def run() -> None:
        client = awa.AsyncClient(url, max_connections=4)
        loop = asyncio.get_running_loop()
        seq = 0
        credit = 0.0
        last = loop.time()
        while not stop.is_set() and os.getppid() == parent:
            await asyncio.sleep(max(0.0, batch_ms / 1000 - (loop.time() - last)))
            now = loop.time()
            if mode == "depth-target":
                credit = float(max(0, target - depth.value))
            else:
                credit += producer_rate(rate) * (now - last)  # on real elapsed time
            last = now
            while credit >= 1 and not stop.is_set():
                size = min(batch_max, int(credit))
                created = time.time() * 1000
                jobs = [
                    BenchJob(
                        seq=seq + i,
                        key=(seq + i) % keys,
                        producer=name,
                        created_ms=created,
                        padding=padding,
                    )
                    for i in range(size)
                ]
                options = [{"ordering_key": f"k{job.key}"} for job in jobs] if ordered else None
                try:
                    await client.insert_many_copy(jobs, queue=QUEUE, opts=options)
                    if log is not None:
                        log.write(f"E,{name},{seq},{size}\n")
                    with enqueued.get_lock():
                        enqueued.value += size
                    credit -= size
                except Exception as exc:
                    print(f"[awa-python] producer insert failed: {exc}", file=sys.stderr)
                    credit = 0
                    break
                finally:
                    # The numbers are used up either way: none is inserted twice.
                    seq += size
                if mode == "depth-target":
                    break

    asyncio.run(run())


async def main() -> None:
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("awa-python-bench: DATABASE_URL is not set")
    mode = os.environ.get("PRODUCER_MODE") or "fixed"
    if mode not in ("fixed", "depth-target"):
        sys.exit(f"awa-python-bench: PRODUCER_MODE must be fixed or depth-target (got {mode!r})")
    workers = env_int("WORKER_COUNT", 32, minimum=1)
    work_ms = env_int("JOB_WORK_MS", 1)
    every = env_int("SAMPLE_EVERY_S", 5, minimum=1)
    log_dir = os.environ.get("ORDER_LOG_DIR")

    for attempt in range(30):
        try:
            await awa.migrate(url)
            break
        except Exception as exc:  # replicas starting at once race for the schema
            print(f"[awa-python] migrate failed (attempt {attempt + 1}): {exc}", file=sys.stderr)
            await asyncio.sleep(1)

    emit(
        {
            "kind": "descriptor",
            "system": "awa-python",
            "event_tables": ["awa.queue_ring_state", "awa.lease_ring_state", "awa.dlq_entries"],
            "extensions": [],
            "version": "awa-pg " + getattr(awa, "__version__", "0.6.9"),
            "schema_version": "current",
            "db_name": (urlparse(url).path or "/").lstrip("/") or "awa_python_bench",
            "started_at": now_iso(),
        }
    )

    client = awa.AsyncClient(url, max_connections=max(10, min(workers, 32) + 4))
    latencies: collections.deque[tuple[float, float]] = collections.deque(maxlen=32768)
    counts = {"completed": 0}
    log = None
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, f"awa-{instance_id()}-{os.getpid()}.log")
        log = open(path, "a", buffering=1)  # a line each, written before the job completes

    @client.task(BenchJob, queue=QUEUE)
    async def handle(job) -> None:
        started = time.time()
        latencies.append((time.monotonic(), max(0.0, started * 1000 - job.args.created_ms)))
        if work_ms:
            await asyncio.sleep(work_ms / 1000)
        counts["completed"] += 1
        if log is not None:
            args = job.args
            log.write(
                f"{args.key},{args.producer},{args.seq},"
                f"{int(started * 1e6)},{int(time.time() * 1e6)}\n"
            )

    await client.start([(QUEUE, workers)], poll_interval_ms=50)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)

    context = multiprocessing.get_context("spawn")
    enqueued = context.Value("q", 0)
    depth = context.Value("q", 0)
    producer_stop = context.Event()
    producer = context.Process(
        target=produce, args=(url, os.getpid(), enqueued, depth, producer_stop), daemon=True
    )
    producer.start()

    async def poll_depth() -> None:
        # The jobs this replica inserted and has not completed: its queue depth (awa's
        # `queue_stats()` reports nothing for the queue here, and its `jobs` view neither shows
        # the jobs waiting in its queue storage nor answers fast). The producer tops the queue
        # up from it in depth-target mode.
        while not stop.is_set():
            depth.value = max(0, enqueued.value - counts["completed"])
            await asyncio.sleep(0.1)

    async def sample() -> None:
        await asyncio.sleep(every - (time.time() % every))
        last_enq, last_cmp, last_t = enqueued.value, counts["completed"], loop.time()
        while not stop.is_set():
            await asyncio.sleep(every)
            now = loop.time()
            dt = max(0.001, now - last_t)
            window = sorted(v for t, v in latencies if t >= time.monotonic() - 30)

            def q(p: float) -> float:
                return window[min(len(window) - 1, int(round(p * (len(window) - 1))))] if window else 0.0

            produced = enqueued.value
            metrics = [
                ("claim_p50_ms", q(0.5), 30.0),
                ("claim_p95_ms", q(0.95), 30.0),
                ("claim_p99_ms", q(0.99), 30.0),
                ("enqueue_rate", (produced - last_enq) / dt, float(every)),
                ("completion_rate", (counts["completed"] - last_cmp) / dt, float(every)),
            ]
            if instance_id() == 0:
                metrics.append(("queue_depth", float(depth.value), 0.0))
            t = now_iso()
            for metric, value, window_s in metrics:
                emit(
                    {
                        "t": t, "system": "awa-python", "kind": "adapter",
                        "subject_kind": "adapter", "subject": "", "metric": metric,
                        "value": value, "window_s": window_s,
                    }
                )
            last_enq, last_cmp, last_t = produced, counts["completed"], now

    tasks = [asyncio.create_task(c()) for c in (poll_depth, sample)]
    await stop.wait()
    producer_stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.shutdown(timeout_ms=3000)
    producer.join(timeout=5)
    if producer.is_alive():
        producer.kill()
    if log is not None:
        log.close()
    print("[awa-python] stopped", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
