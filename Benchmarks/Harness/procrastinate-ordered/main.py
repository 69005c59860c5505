#!/usr/bin/env python3
"""procrastinate in its ordered mode, for the benchmark harness: the harness's own adapter
(`procrastinate-bench/main.py` in HARNESS_DIR), run unchanged, with every job deferred under
procrastinate's `lock` set to its key.

procrastinate's documentation: jobs that share a lock "run sequentially and in order" (a job does
not start while another job of its lock is running, and a lock's jobs start in the order they
were deferred). The adapter numbers its jobs 0, 1, 2, ... (`seq`); job `seq` gets the key
`seq % BENCH_KEYS` (1,000 unless set), round robin, as Orderly's adapter spreads its messages.
The lock is set where procrastinate turns jobs into its `defer_jobs` query, so the adapter's
bulk path (`batch_defer_async`, one multi-row insert per batch) stays one statement.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from procrastinate import manager

KEYS = int(os.environ.get("BENCH_KEYS") or "1000")
if KEYS < 1:
    sys.exit(f"procrastinate-ordered: BENCH_KEYS must be 1 or more (got {KEYS})")

_query_kwargs = manager.JobManager._defer_jobs_query_kwargs


def _with_key_lock(self, jobs):
    keyed = [
        job.evolve(lock=f"k{int(job.task_kwargs['seq']) % KEYS}")
        if job.lock is None and "seq" in job.task_kwargs
        else job
        for job in jobs
    ]
    return _query_kwargs(self, keyed)


manager.JobManager._defer_jobs_query_kwargs = _with_key_lock

script = Path(os.environ["HARNESS_DIR"]) / "procrastinate-bench" / "main.py"
sys.argv[0] = str(script)
runpy.run_path(str(script), run_name="__main__")
