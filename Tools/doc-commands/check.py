#!/usr/bin/env python3
"""Runs every `swift run`, `swift build` and `swift test` command that README.md and the DocC
articles show, as written, so that none of them can break unseen.

    python3 Tools/doc-commands/check.py [--list]

Commands are read from fenced shell blocks and from inline code (an inline span may wrap across
a line). What "as written" means for the few that cannot be run verbatim:

- a command that ends in `...` (its arguments left to the reader) runs with `--help` there:
  it must build and know the subcommand;
- a `swift test` command with arguments is built with `swift build --build-tests` and the same
  traits (the tests themselves run in `.ci/run`'s own steps, against the cluster it starts);
- a command with a placeholder (`<name>`), the plain `swift test` and `swift run docs-gen` (run,
  as `--check`, by their own steps of `.ci/run`) are listed as covered elsewhere.

Commands run in the checkout's `.build`, grouped by their traits so the build is switched as
little as possible. Exit status 1 if any fails; each failure is printed with its source.
"""

import glob
import os
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = ["README.md"] + sorted(
    glob.glob("Modules/*/*.docc/*.md") + glob.glob("Modules/*/*.docc/**/*.md", recursive=True)
)
COMMAND = re.compile(r"^swift (run|build|test)\b")
COVERED = {
    "swift test": ".ci/run's step 'swift test (the README's test command)'",
    "swift run docs-gen": ".ci/run's step 'docs-gen --check' (docs-gen writes the docs; --check compares)",
    "swift run docs-gen --check": ".ci/run's step 'docs-gen --check'",
}


def commands_in(path):
    """(command, line) for every swift command the file shows."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    found = []
    # Fenced blocks: every line that is a swift command (a `$ ` prompt is dropped).
    for match in re.finditer(r"^```([a-z]*)\n(.*?)^```", text, re.S | re.M):
        language, body = match.group(1), match.group(2)
        if language not in ("", "sh", "bash", "shell", "console"):
            continue
        start = text.count("\n", 0, match.start()) + 2
        for offset, line in enumerate(body.split("\n")):
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            if COMMAND.match(line):
                found.append((line, start + offset))
    # Inline code outside fenced blocks, joined across a line break.
    outside = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    for match in re.finditer(r"`([^`\n]*(?:\n[^`\n]*)?)`", outside):
        span = " ".join(match.group(1).split())
        if COMMAND.match(span):
            found.append((span, outside.count("\n", 0, match.start()) + 1))
    return found


def traits_of(words):
    """The value of --traits, or '' for the default."""
    for index, word in enumerate(words):
        if word == "--traits" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--traits="):
            return word.split("=", 1)[1]
    return ""


def plan():
    """Every distinct command, with how it is checked."""
    seen = {}
    for path in SOURCES:
        for command, line in commands_in(path):
            seen.setdefault(command, []).append(f"{path}:{line}")
    runs, covered = [], []
    for command, where in seen.items():
        if "<" in command or command in COVERED:
            covered.append((command, where, COVERED.get(command, "a placeholder, not a command")))
            continue
        words = shlex.split(command)
        if words[-1] == "...":
            words[-1] = "--help"
        if words[1] == "test" and len(words) > 2:
            kept = []
            skip = False
            for index, word in enumerate(words[2:]):
                if skip:
                    skip = False
                    continue
                if word in ("--filter", "--skip"):
                    skip = True
                    continue
                kept.append(word)
            words = ["swift", "build", "--build-tests"] + kept
        runs.append((traits_of(words), words, command, where))
    runs.sort(key=lambda run: (run[0], run[1]))
    return runs, covered


def main():
    runs, covered = plan()
    if "--list" in sys.argv:
        for traits, words, command, where in runs:
            print(f"run   {' '.join(words)}    ({command}; {', '.join(where)})")
        for command, where, why in covered:
            print(f"elsewhere  {command}    ({why}; {', '.join(where)})")
        return 0
    failures = []
    for traits, words, command, where in runs:
        started = time.monotonic()
        print(f"==> {' '.join(words)}   (shown as `{command}` in {', '.join(where)})", flush=True)
        result = subprocess.run(words, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        seconds = time.monotonic() - started
        tail = "\n".join(result.stdout.strip().split("\n")[-15:])
        if result.returncode != 0:
            print(f"    FAILED (exit {result.returncode}) in {seconds:.0f} s:\n{tail}", flush=True)
            failures.append((command, where))
        else:
            print(f"    ok in {seconds:.0f} s", flush=True)
    for command, where, why in covered:
        print(f"--- `{command}` ({', '.join(where)}): {why}")
    if failures:
        print(f"\n{len(failures)} documented command(s) failed:")
        for command, where in failures:
            print(f"  `{command}` in {', '.join(where)}")
        return 1
    print(f"\nevery documented command works: {len(runs)} run, {len(covered)} covered elsewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main())
