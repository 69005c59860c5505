"""Runs the benchmark harness (hardbyte/postgresql-job-queue-benchmarking) with Orderly's
adapter, and the procrastinate and awa adapters as native processes instead of Docker images.

    HARNESS_DIR=/path/to/harness ORDERLY_ADAPTER=/path/to/harness-adapter \
      python run.py run --systems orderly,procrastinate,awa-python --scenario ...

Everything after the script's name goes to the harness's own command line (`bench.py`).
Benchmarks/Scripts/harness.sh sets the environment and runs the published matrix.

The harness is not changed: its adapter registry gets three native entries before its `main`
runs. `orderly` is this folder's adapter (a Swift executable); `procrastinate` is the harness's
own `procrastinate-bench/main.py`, run by the virtual environment's Python; `awa-python` is
`awa-python-bench/main.py` here (the harness names the variant but ships no adapter for it at
the commit used).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HARNESS = Path(os.environ["HARNESS_DIR"]).resolve()
sys.path.insert(0, str(HARNESS))

from bench_harness import adapters  # noqa: E402
from bench_harness.adapters import AdapterEntry, LaunchSpec, _base_env  # noqa: E402


def _nothing_to_build(skip: bool) -> None:
    return None


def launch_orderly(manifest, overrides) -> LaunchSpec:
    return LaunchSpec(argv=[os.environ["ORDERLY_ADAPTER"]], env=_base_env(manifest, overrides))


def launch_procrastinate(manifest, overrides) -> LaunchSpec:
    return LaunchSpec(
        argv=[sys.executable, str(HARNESS / "procrastinate-bench" / "main.py")],
        env=_base_env(manifest, overrides),
    )


def launch_awa_python(manifest, overrides) -> LaunchSpec:
    return LaunchSpec(
        argv=[sys.executable, str(HERE / "awa-python-bench" / "main.py")],
        env=_base_env(manifest, overrides),
    )


adapters.ADAPTERS["orderly"] = AdapterEntry(
    bench_dir=HERE, builder=_nothing_to_build, launcher=launch_orderly
)
adapters.ADAPTERS["procrastinate"] = AdapterEntry(
    bench_dir=HARNESS / "procrastinate-bench",
    builder=_nothing_to_build,
    launcher=launch_procrastinate,
)
adapters.ADAPTERS["awa-python"] = AdapterEntry(
    bench_dir=HERE / "awa-python-bench",
    builder=_nothing_to_build,
    launcher=launch_awa_python,
)

from bench_harness.orchestrator import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
