#!/usr/bin/env python3
"""Runs every "Try this" exercise of the course as written, and checks what the lesson says.

Each numbered item under a lesson's "## Try this" heading carries a comment that says how it
is checked, one or more lines inside `<!-- exercise: ... -->`, with clauses separated by `|`:

  edit EXAMPLE [ARGS]     apply the replacements to Examples/EXAMPLE's main.swift, build, run
                          (with ARGS, the example's own flags)
  run ARGUMENTS           `swift run ARGUMENTS` (an `orderly` command, an example)
  sh SCRIPT               a bash script, run in a scratch folder with the root package's built
                          products (`orderly`, the examples) first on its PATH: for an exercise
                          that runs commands side by side, as in two terminals
  input TEXT              standard input for `run` (`\\n` for a new line)
  replace OLD => NEW      text the exercise changes (it must be in the file: the lesson and the
                          code cannot drift apart)
  expect TEXT             the output contains TEXT
  expect-not TEXT         the output does not contain TEXT
  hangs                   the program is still running after 20 s (then it is stopped)
  same-twice              two runs print the same output
  read                    a question to think about: nothing to run
  manual open-ended: WHY  a change too open to apply mechanically, which promises no effect (an
                          exercise that says what will happen is checked by one of the above);
                          the reason must begin with `open-ended:`, and is printed

An edited example file is restored afterwards, whatever happens: a failure, Ctrl-C, or a
SIGTERM or SIGHUP (a CI time limit, a closed terminal) all restore it before the check exits;
only SIGKILL cannot (then `git checkout -- Examples` does). Each edited example is built once;
its binary is then built again from the restored source, so that no binary of an edited example
outlives the check (docs-gen and the tests run the built examples). With `--no-rebuild` (CI,
where nothing runs the examples' binaries after this check without building them first) the
source is restored without that second build: the next `swift build` rebuilds the example.
Run from anywhere:

  python3 Tools/exercise-check/check.py                 # every lesson
  python3 Tools/exercise-check/check.py 4 9             # lessons 4 and 9
  python3 Tools/exercise-check/check.py --no-rebuild    # CI
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COURSE = os.path.join(ROOT, "docs", "course")
RUN_TIMEOUT = 600
HANG_SECONDS = 20
# Set by --no-rebuild: restore an edited source without building its example again.
REBUILD_AFTER_EDIT = True


class Failure(Exception):
    pass


class Stopped(BaseException):
    """A SIGTERM or SIGHUP: raised where the check is, so that every `finally` runs (the edited
    example is restored) before it exits."""


def stop(signum, _frame):
    raise Stopped(signal.Signals(signum).name)


def lessons(selected):
    for name in sorted(os.listdir(COURSE)):
        match = re.match(r"(\d+)-.*\.md$", name)
        if match and (not selected or int(match.group(1)) in selected):
            yield int(match.group(1)), os.path.join(COURSE, name)


def exercises(path):
    """The numbered items of the "Try this" section, each with its exercise comment."""
    text = open(path, encoding="utf-8").read()
    section = text.split("\n## Try this\n", 1)
    if len(section) < 2:
        return []
    body = re.split(r"\n## ", section[1], 1)[0]
    items = re.split(r"\n(?=\d+\. )", "\n" + body.strip())
    found = []
    for item in items:
        item = item.strip()
        number = re.match(r"(\d+)\. ", item)
        if not number:
            continue
        specs = re.findall(r"<!-- exercise:(.*?)-->", item, re.S)
        if len(specs) != 1:
            raise Failure(
                f"{os.path.relpath(path, ROOT)}: exercise {number.group(1)} needs exactly one "
                "<!-- exercise: ... --> comment saying how it is checked"
            )
        # A comment may span lines; spaces inside a clause are kept as written.
        text = re.sub(r"\n\s*", " ", specs[0])
        clauses = [c.strip() for c in text.split("|") if c.strip()]
        found.append((int(number.group(1)), clauses))
    return found


def parse(clauses):
    spec = {"replace": [], "expect": [], "expect-not": []}
    for clause in clauses:
        word, _, rest = clause.partition(" ")
        if word == "replace":
            old, sep, new = rest.partition(" => ")
            if not sep:
                raise Failure(f"replace needs OLD => NEW: {clause}")
            spec["replace"].append((unquote(old), unquote(new)))
        elif word in ("expect", "expect-not"):
            spec[word].append(unquote(rest))
        elif word in ("edit", "run", "manual", "input", "sh"):
            spec[word] = rest
        elif word in ("hangs", "same-twice", "read"):
            spec[word] = True
        else:
            raise Failure(f"unknown clause: {clause}")
    return spec


def unquote(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == "`":
        text = text[1:-1]
    return text.replace("\\n", "\n")


def swift(arguments, **kwargs):
    return subprocess.run(["swift", *arguments], cwd=ROOT, capture_output=True, text=True, **kwargs)


_bin_paths = {}


def bin_path(package):
    """The folder of a package's built products (asked of SwiftPM once per package)."""
    key = tuple(package)
    if key not in _bin_paths:
        _bin_paths[key] = swift(["build", *package, "--show-bin-path"]).stdout.strip()
    return _bin_paths[key]


def example_source(name):
    folder = os.path.join(ROOT, "Examples", name)
    packaged = os.path.join(folder, "Sources", name, "main.swift")
    if os.path.exists(packaged):
        return packaged, ["--package-path", folder]
    return os.path.join(folder, "main.swift"), []


def run_program(command, spec, cwd):
    """Runs a built program; returns its output, or None if it was still running (hangs)."""
    stdin = spec.get("input")
    timeout = HANG_SECONDS if spec.get("hangs") else RUN_TIMEOUT
    try:
        result = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
            input=stdin.replace("\\n", "\n") if stdin else None,
            # The shell keeps its default database under XDG_DATA_HOME: the scratch folder.
            env={**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": cwd},
        )
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        raise Failure(f"exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result.stdout


def check(spec, scratch):
    if spec.get("manual") and not spec["manual"].startswith("open-ended:"):
        raise Failure(
            "a manual exercise must be open-ended (`manual open-ended: WHY`): one that promises "
            "an effect is checked with edit, run or sh, so that the promise is asserted"
        )
    if spec.get("read") or spec.get("manual"):
        return "not run: " + ("a question to think about" if spec.get("read") else spec["manual"])
    if "edit" in spec:
        # `edit NAME` runs the changed example as is; `edit NAME --flag` with its arguments.
        name, *arguments = spec["edit"].split()
        source, package = example_source(name)
        original = open(source, encoding="utf-8").read()
        changed = original
        for old, new in spec["replace"]:
            if old not in changed:
                raise Failure(f"`{old}` is not in {os.path.relpath(source, ROOT)}: lesson and code disagree")
            changed = changed.replace(old, new)
        try:
            with open(source, "w", encoding="utf-8") as file:
                file.write(changed)
            built = swift(["build", *package, "--product", name])
            if built.returncode != 0:
                raise Failure("the changed example does not build:\n" + built.stdout[-3000:] + built.stderr[-3000:])
            command = [os.path.join(bin_path(package), name), *[unquote(a) for a in arguments]]
            outputs = [run_program(command, spec, scratch)]
            if spec.get("same-twice"):
                outputs.append(run_program(command, spec, scratch))
        finally:
            with open(source, "w", encoding="utf-8") as file:
                file.write(original)
            # The binary of the changed example must not outlive it: docs-gen and the tests run
            # the built examples. In CI (--no-rebuild) nothing runs it without building first.
            if REBUILD_AFTER_EDIT:
                swift(["build", *package, "--product", name])
    elif "run" in spec:
        arguments = spec["run"].split()
        package = []
        if arguments[:1] == ["--package-path"]:
            package, arguments = ["--package-path", os.path.join(ROOT, arguments[1])], arguments[2:]
        product = arguments[0]
        built = swift(["build", *package, "--product", product])
        if built.returncode != 0:
            raise Failure(f"`{product}` does not build:\n" + built.stderr[-3000:])
        binary = os.path.join(bin_path(package), product)
        command = [binary, *[unquote(a) for a in arguments[1:]]]
        outputs = [run_program(command, spec, scratch)]
        if spec.get("same-twice"):
            outputs.append(run_program(command, spec, scratch))
    elif "sh" in spec:
        built = swift(["build", "--product", "orderly"])
        if built.returncode != 0:
            raise Failure("`orderly` does not build:\n" + built.stderr[-3000:])
        binary = bin_path([])
        env = {**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": scratch,
               "PATH": binary + os.pathsep + os.environ.get("PATH", "")}
        try:
            result = subprocess.run(["bash", "-c", unquote(spec["sh"])], cwd=scratch, env=env,
                                    capture_output=True, text=True, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure(f"did not end within {RUN_TIMEOUT} s")
        if result.returncode != 0:
            raise Failure(f"exited {result.returncode}:\n{result.stdout}{result.stderr}")
        outputs = [result.stdout]
    else:
        raise Failure("an exercise needs edit, run, sh, read or manual")
    if spec.get("hangs"):
        if outputs[0] is not None:
            raise Failure(f"expected it to hang, but it exited:\n{outputs[0]}")
        return f"still running after {HANG_SECONDS} s, as the lesson says"
    if any(output is None for output in outputs):
        raise Failure(f"did not end within {RUN_TIMEOUT} s")
    output = outputs[0]
    for text in spec["expect"]:
        if text.startswith("file "):
            name, _, contains = text[5:].partition(" ")
            path = os.path.join(scratch, name)
            if not os.path.exists(path) or contains not in open(path, encoding="utf-8").read():
                raise Failure(f"no file {name} containing `{contains}`")
        elif text not in output:
            raise Failure(f"the output lacks `{text}`:\n{output}")
    for text in spec["expect-not"]:
        if text in output:
            raise Failure(f"the output has `{text}`:\n{output}")
    if spec.get("same-twice") and outputs[0] != outputs[1]:
        raise Failure("two runs printed different output")
    return "as the lesson says"


def main():
    global REBUILD_AFTER_EDIT
    arguments = sys.argv[1:]
    if "--no-rebuild" in arguments:
        REBUILD_AFTER_EDIT = False
        arguments.remove("--no-rebuild")
    selected = {int(a) for a in arguments}
    failures = 0
    ran = 0
    for number, path in lessons(selected):
        for item, clauses in exercises(path):
            label = f"lesson {number}, exercise {item}"
            scratch = tempfile.mkdtemp(prefix="orderly-exercise-")
            # Said before it runs, so that a time limit's report names the exercise it ended.
            print(f"...  {label}")
            try:
                verdict = check(parse(clauses), scratch)
                print(f"ok   {label}: {verdict}")
                ran += 0 if verdict.startswith("not run") else 1
            except Failure as failure:
                failures += 1
                print(f"FAIL {label}: {failure}")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    if failures:
        print(f"exercise-check: {failures} exercise(s) do not do what their lesson says")
        sys.exit(1)
    print(f"exercise-check: {ran} exercises run as written; each did what its lesson says")


if __name__ == "__main__":
    # Line by line, also into a log file: a time limit's report shows the last exercise begun.
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        main()
    except Failure as failure:
        print(f"exercise-check: {failure}")
        sys.exit(1)
    except (Stopped, KeyboardInterrupt) as stopped:
        print(f"exercise-check: stopped ({stopped or 'SIGINT'}); every edited example is restored")
        sys.exit(1)
