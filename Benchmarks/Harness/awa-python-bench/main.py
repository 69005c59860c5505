#!/usr/bin/env python3
"""The awa peer (Python SDK, `awa-pg` from PyPI) for the benchmark harness, as a native process.

The harness (hardbyte/postgresql-job-queue-benchmarking) registers an `awa-python` variant but
ships no adapter for it at the commit Orderly uses; this one speaks the harness's JSONL protocol
(CONTRIBUTING_ADAPTERS.md there) the way its procrastinate adapter does: a paced producer on
real elapsed time (awa's COPY path, `insert_many_copy`), `WORKER_COUNT` workers on one queue,
claim latency (insert to handler start) over 30 seconds, enqueue and completion rates, and the
queue depth from `queue_stats()`. Unordered: awa's default queue (no ordering key).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlparse

import awa

QUEUE = "awa_longhorizon_bench"


def env_int(key: str, default: int) -> int:
    value = os.environ.get(key)
    return int(value) if value else default


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
    created_ms: float
    padding: str = ""


async def main() -> None:
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("awa-python-bench: DATABASE_URL is not set")
    rate = env_int("PRODUCER_RATE", 800)
    batch_max = max(1, env_int("PRODUCER_BATCH_MAX", 128))
    batch_ms = max(1, env_int("PRODUCER_BATCH_MS", 25))
    workers = env_int("WORKER_COUNT", 32)
    work_ms = env_int("JOB_WORK_MS", 1)
    every = max(1, env_int("SAMPLE_EVERY_S", 5))
    padding = "x" * max(0, env_int("JOB_PAYLOAD_BYTES", 256) - 64)

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
    counts = {"enqueued": 0, "completed": 0, "depth": 0}

    @client.task(BenchJob, queue=QUEUE)
    async def handle(job) -> None:
        latencies.append((time.monotonic(), max(0.0, time.time() * 1000 - job.args.created_ms)))
        if work_ms:
            await asyncio.sleep(work_ms / 1000)
        counts["completed"] += 1

    await client.start([(QUEUE, workers)], poll_interval_ms=50)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)

    async def produce() -> None:
        seq = 0
        credit = 0.0
        last = loop.time()
        while not stop.is_set():
            await asyncio.sleep(max(0.0, batch_ms / 1000 - (loop.time() - last)))
            now = loop.time()
            credit += producer_rate(rate) * (now - last)  # on real elapsed time
            last = now
            while credit >= 1 and not stop.is_set():
                size = min(batch_max, int(credit))
                created = time.time() * 1000
                jobs = [BenchJob(seq=seq + i, created_ms=created, padding=padding) for i in range(size)]
                try:
                    await client.insert_many_copy(jobs, queue=QUEUE)
                    counts["enqueued"] += size
                    seq += size
                    credit -= size
                except Exception as exc:
                    print(f"[awa-python] producer insert failed: {exc}", file=sys.stderr)
                    credit = 0
                    break

    async def poll_depth() -> None:
        while not stop.is_set():
            if instance_id() == 0:
                try:
                    for stat in await client.queue_stats():
                        if stat.queue == QUEUE:
                            counts["depth"] = stat.available
                except Exception:
                    pass
            await asyncio.sleep(0.5)

    async def sample() -> None:
        await asyncio.sleep(every - (time.time() % every))
        last_enq, last_cmp, last_t = counts["enqueued"], counts["completed"], loop.time()
        while not stop.is_set():
            await asyncio.sleep(every)
            now = loop.time()
            dt = max(0.001, now - last_t)
            window = sorted(v for t, v in latencies if t >= time.monotonic() - 30)

            def q(p: float) -> float:
                return window[min(len(window) - 1, int(round(p * (len(window) - 1))))] if window else 0.0

            metrics = [
                ("claim_p50_ms", q(0.5), 30.0),
                ("claim_p95_ms", q(0.95), 30.0),
                ("claim_p99_ms", q(0.99), 30.0),
                ("enqueue_rate", (counts["enqueued"] - last_enq) / dt, float(every)),
                ("completion_rate", (counts["completed"] - last_cmp) / dt, float(every)),
            ]
            if instance_id() == 0:
                metrics.append(("queue_depth", float(counts["depth"]), 0.0))
            t = now_iso()
            for metric, value, window_s in metrics:
                emit(
                    {
                        "t": t, "system": "awa-python", "kind": "adapter",
                        "subject_kind": "adapter", "subject": "", "metric": metric,
                        "value": value, "window_s": window_s,
                    }
                )
            last_enq, last_cmp, last_t = counts["enqueued"], counts["completed"], now

    tasks = [asyncio.create_task(c()) for c in (produce, poll_depth, sample)]
    await stop.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.shutdown(timeout_ms=3000)
    print("[awa-python] stopped", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
