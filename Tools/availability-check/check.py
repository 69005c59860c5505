#!/usr/bin/env python3
"""Library targets use no API newer than the platform floor Package.swift claims.

Linux has no availability checking, so a library target can compile here and fail on a Mac at
the package's floor (macOS 13 / iOS 16): `Synchronization.Mutex` needs macOS 15. This script
reads every Swift file of every library product's target (and the helper targets they depend
on) and reports each use of a listed API that is newer than the floor and is not inside one of:

- an `@available(macOS N, ...)` declaration with N at least the API's version (the attribute
  guards the declaration it is written on: a type, extension or function body up to its closing
  brace, or a stored property's line);
- an `if #available(macOS N, ...)` block, or the rest of the scope after a
  `guard #available(macOS N, ...)`;
- an `#if` branch that Apple systems never compile (`os(Linux)`, `canImport(Glibc)`,
  `!ORDERLY_PORTABLE_LOCKS`, which Package.swift defines on every Apple platform, and the
  `#else` of their opposites).

What it does not check: APIs outside its table (below), availability through a typealias or a
generic parameter, or code it cannot parse (it strips comments and strings and matches braces,
it does not type-check). `import Synchronization` is refused outside the platform room
(Modules/OrderlyCore/Platform) by house rule: library code locks with `OrderlyLock` and
`OrderlyAtomic`.

  python3 Tools/availability-check/check.py              # check the package; exit 1 on a finding
  python3 Tools/availability-check/check.py --self-test  # the checker's own cases
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "swift-source"))
from swift_source import (  # noqa: E402
  blank_comments_and_strings,
  enclosing_close,
  line_numbers,
  matching,
  run_self_tests,
)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PLATFORM_ROOM = os.path.join("Modules", "OrderlyCore", "Platform")


@dataclass(frozen=True)
class API:
  """An API newer than some floor: its name, how it is found, and the macOS that brought it."""

  name: str
  pattern: re.Pattern[str]
  macos: int
  ios: int


def api(name: str, pattern: str, macos: int, ios: int) -> API:
  return API(name, re.compile(pattern), macos, ios)


# What the check looks for. The versions are those of Apple's SDKs (macOS / iOS).
APIS = [
  api("Synchronization.Mutex", r"(?<![\w.])Mutex\s*(<|\()", 15, 18),
  api("Synchronization.Atomic", r"(?<![\w.])Atomic\s*(<|\()", 15, 18),
  api("Synchronization.AtomicLazyReference", r"\bAtomicLazyReference\b", 15, 18),
  api("task executors (TaskExecutor)", r"\bTaskExecutor\b", 15, 18),
  api("withTaskExecutorPreference", r"\bwithTaskExecutorPreference\b", 15, 18),
  api("globalConcurrentExecutor", r"\bglobalConcurrentExecutor\b", 15, 18),
  api("Task(executorPreference:)", r"\bexecutorPreference\s*:", 15, 18),
  api("Int128 / UInt128", r"\bU?Int128\b", 15, 18),
  api("Observation (@Observable)", r"@Observable\b", 14, 17),
  api("Observation (withObservationTracking)", r"\bwithObservationTracking\b", 14, 17),
  api("Observation (ObservationRegistrar)", r"\bObservationRegistrar\b", 14, 17),
  api("withDiscardingTaskGroup", r"\bwith(Throwing)?DiscardingTaskGroup\b", 14, 17),
  api("ExecutorJob", r"\bExecutorJob\b", 14, 17),
  api("Task.immediate", r"\bTask\s*\.\s*immediate\b|\bimmediate\s*:", 26, 26),
  api("escalatePriority", r"\bescalatePriority\b", 26, 26),
  api("InlineArray", r"\bInlineArray\b", 26, 26),
]

IMPORT_SYNCHRONIZATION = re.compile(
  r"^\s*(@\w+\s+)*(public\s+|internal\s+|package\s+|private\s+|fileprivate\s+)?import\s+Synchronization\b",
  re.M,
)

# `#if` conditions whose code Apple systems never compile, and those whose `#else` they never
# compile.
LINUX_ONLY = {"os(Linux)", "canImport(Glibc)", "canImport(Musl)", "!ORDERLY_PORTABLE_LOCKS",
              "os(Linux) || os(Android)", "!canImport(Darwin)"}
APPLE_OR_PORTABLE = {"ORDERLY_PORTABLE_LOCKS", "canImport(Darwin)", "!os(Linux)",
                     "!canImport(Glibc)"}


def linux_only_lines(code: str) -> set[int]:
  """Line numbers (1-based) inside `#if` branches Apple systems never compile."""
  lines = code.split("\n")
  stack: list[bool] = []  # per open #if: is the current branch Linux-only?
  stack_conditions: list[str] = []  # per open #if: its condition
  result: set[int] = set()
  for number, line in enumerate(lines, start=1):
    stripped = line.strip()
    m = re.match(r"#(if|elseif|else|endif)\b\s*(.*)", stripped)
    if m:
      kind, condition = m.group(1), re.sub(r"\s+", " ", m.group(2).strip())
      if kind == "if":
        stack.append(condition in LINUX_ONLY)
        stack_conditions.append(condition)
      elif kind == "elseif" and stack:
        stack[-1] = condition in LINUX_ONLY
      elif kind == "else" and stack:
        stack[-1] = stack_conditions[-1] in APPLE_OR_PORTABLE
      elif kind == "endif" and stack:
        stack.pop()
        stack_conditions.pop()
      if any(stack):
        result.add(number)
      continue
    if any(stack):
      result.add(number)
  return result


def macos_version(arguments: str) -> float | None:
  """The macOS version an availability list names (inf for `macOS, unavailable`)."""
  if re.search(r"\bmacOS\s*,\s*unavailable\b", arguments):
    return float("inf")
  m = re.search(r"\bmacOS\s+(\d+)(?:\.(\d+))?", arguments)
  if not m:
    return None
  return float(m.group(1)) + (float("0." + m.group(2)) if m.group(2) else 0.0)


def guarded_ranges(code: str) -> list[tuple[int, int, float]]:
  """(start, end, macOS version) spans that an availability attribute or condition guards."""
  ranges = []
  for m in re.finditer(r"@available\s*\(([^)]*)\)", code):
    version = macos_version(m.group(1))
    if version is None:
      continue
    rest = code[m.end():]
    # Skip further attributes and modifiers to the declaration's keyword.
    keyword = re.match(
      r"(\s|@\w+(\([^)]*\))?|public|internal|package|private|fileprivate|open|final|static|"
      r"nonisolated|override|mutating|nonmutating|convenience|required|indirect|consuming|"
      r"borrowing)*\s*(\w+)",
      rest,
    )
    word = keyword.group(keyword.lastindex) if keyword else ""
    if word in ("let", "var", "case", "typealias"):
      end_of_line = code.find("\n", m.end() + (keyword.end() if keyword else 0))
      end_of_line = len(code) if end_of_line < 0 else end_of_line
      line = code[m.end():end_of_line]
      brace = line.find("{")
      end = matching(code, m.end() + brace) if brace >= 0 else end_of_line
    else:
      brace = code.find("{", m.end())
      end = matching(code, brace) if brace >= 0 else len(code)
    ranges.append((m.start(), end, version))
  for m in re.finditer(r"\b(if|guard|while)\s+#available\s*\(([^)]*)\)", code):
    version = macos_version(m.group(2))
    if version is None:
      continue
    if m.group(1) == "guard":
      ranges.append((m.end(), enclosing_close(code, m.end()), version))
    else:
      brace = code.find("{", m.end())
      ranges.append((m.start(), matching(code, brace) if brace >= 0 else len(code),
                     version))
  return ranges


@dataclass
class Finding:
  path: str
  line: int
  api: str
  needs: str
  text: str

  def __str__(self) -> str:
    return f"{self.path}:{self.line}: {self.api} needs {self.needs}, above the floor: {self.text}"


def check_source(path: str, text: str, floor: int, in_platform_room: bool) -> list[Finding]:
  """The findings in one file's text."""
  code = blank_comments_and_strings(text)
  linux = linux_only_lines(code)
  ranges = guarded_ranges(code)
  line_of = line_numbers(code)

  source_lines = text.split("\n")
  findings = []
  for entry in APIS:
    if entry.macos <= floor:
      continue
    for m in entry.pattern.finditer(code):
      line = line_of(m.start())
      if line in linux:
        continue
      if any(a <= m.start() <= b and v >= entry.macos for a, b, v in ranges):
        continue
      findings.append(Finding(path, line, entry.name, f"macOS {entry.macos} / iOS {entry.ios}",
                              source_lines[line - 1].strip()))
  if not in_platform_room:
    for m in IMPORT_SYNCHRONIZATION.finditer(code):
      line = line_of(m.start())
      if line in linux:
        continue
      findings.append(Finding(path, line, "import Synchronization (outside the platform room)",
                              "macOS 15 / iOS 18 for its types; use OrderlyLock / OrderlyAtomic",
                              source_lines[line - 1].strip()))
  findings.sort(key=lambda f: f.line)
  return findings


def library_targets(manifest: str) -> dict[str, str]:
  """Each library product's target, and the package's own targets they depend on: name -> path."""
  paths = {}
  for m in re.finditer(r"\.target\(", manifest):
    depth, k = 0, m.end() - 1
    while k < len(manifest):
      depth += {"(": 1, ")": -1}.get(manifest[k], 0)
      if depth == 0:
        break
      k += 1
    block = manifest[m.end():k]
    # A dependency written `.target(name:condition:)` has no path: only a declaration has one.
    name, path = re.search(r"name:\s*\"(\w+)\"", block), re.search(r"path:\s*\"([^\"]+)\"", block)
    if name and path:
      paths[name.group(1)] = (path.group(1), block)
  wanted = []
  for m in re.finditer(r"\.library\(\s*name:\s*\"\w+\",\s*targets:\s*\[([^\]]*)\]", manifest):
    wanted += re.findall(r"\"(\w+)\"", m.group(1))
  seen: dict[str, str] = {}
  while wanted:
    name = wanted.pop()
    if name in seen or name not in paths:
      continue
    path, dependencies = paths[name]
    seen[name] = path
    wanted += [d for d in re.findall(r"\"(\w+)\"", dependencies) if d in paths]
    wanted += re.findall(r"\.target\(\s*name:\s*\"(\w+)\"", dependencies)
  return seen


def floor_of(manifest: str) -> int:
  m = re.search(r"\.macOS\(\.v(\d+)", manifest)
  if not m:
    sys.exit("availability-check: Package.swift names no macOS floor (.macOS(.vN))")
  return int(m.group(1))


def check_package() -> int:
  with open(os.path.join(ROOT, "Package.swift")) as f:
    manifest = f.read()
  floor = floor_of(manifest)
  targets = library_targets(manifest)
  findings: list[Finding] = []
  files = 0
  for name, path in sorted(targets.items()):
    for folder, _, names in os.walk(os.path.join(ROOT, path)):
      for file in sorted(names):
        if not file.endswith(".swift"):
          continue
        full = os.path.join(folder, file)
        relative = os.path.relpath(full, ROOT)
        with open(full, encoding="utf-8") as f:
          text = f.read()
        files += 1
        findings += check_source(relative, text, floor,
                                 relative.startswith(PLATFORM_ROOM + os.sep))
  for finding in findings:
    print(finding)
  if findings:
    print(f"availability-check: {len(findings)} use(s) of an API newer than macOS {floor} in "
          f"library targets, outside @available / #available and Linux-only #if. Guard each "
          "with @available or if #available, or use the platform room's OrderlyLock / "
          "OrderlyAtomic.", file=sys.stderr)
    return 1
  print(f"availability-check: {files} files of {len(targets)} library targets "
        f"({', '.join(sorted(targets))}): no API newer than macOS {floor} outside a guard")
  return 0


SELF_TESTS: list[tuple[str, str, int]] = [
  ("a Mutex outside any guard", "let lock = Mutex<Int>(0)\n", 1),
  ("an Atomic outside any guard", "final class A { let n = Atomic<Int>(0) }\n", 1),
  ("a Mutex in a comment or a string",
   "// Mutex<Int>(0)\n/* Atomic<Int>(0) */\nlet s = \"Mutex<Int>(0)\"\n", 0),
  ("a Mutex inside an @available(macOS 15) type",
   "@available(macOS 15, iOS 18, *)\nfinal class A {\n  let m = Mutex<Int>(0)\n}\n"
   "let after = Mutex<Int>(1)\n", 1),
  ("an @available(macOS 14) type does not cover a macOS 15 API",
   "@available(macOS 14, *)\nfinal class A {\n  let m = Mutex<Int>(0)\n}\n", 1),
  ("an @available(macOS 15) stored property",
   "struct A {\n  @available(macOS 15, *)\n  var m: Mutex<Int> { fatalError() }\n}\n", 0),
  ("if #available guards its block only",
   "func f() {\n  if #available(macOS 15, *) {\n    _ = Mutex<Int>(0)\n  }\n"
   "  _ = Atomic<Int>(0)\n}\n", 1),
  ("guard #available guards the rest of its scope",
   "func f() {\n  guard #available(macOS 15, *) else { return }\n  _ = Mutex<Int>(0)\n}\n"
   "let x = Atomic<Int>(0)\n", 1),
  ("a Linux-only #if branch, and its #else",
   "#if !ORDERLY_PORTABLE_LOCKS\nlet a = Mutex<Int>(0)\n#else\nlet b = Mutex<Int>(0)\n#endif\n"
   "#if ORDERLY_PORTABLE_LOCKS\nlet c = Atomic<Int>(0)\n#else\nlet d = Atomic<Int>(0)\n#endif\n",
   2),
  ("import Synchronization outside the platform room", "import Synchronization\n", 1),
  ("@Observable and withDiscardingTaskGroup at a macOS 13 floor",
   "@Observable final class M {}\nfunc g() async { await withDiscardingTaskGroup { _ in } }\n", 2),
  ("a type named after one is not the API",
   "struct MyMutexBox {}\nlet x = OrderlyAtomic<Int>(0)\nlet y = NIOLockedValueBox<Int>(0)\n", 0),
]


def self_test() -> int:
  return run_self_tests(
    "availability-check",
    SELF_TESTS,
    lambda source: check_source("sample.swift", source, 13, False),
  )


if __name__ == "__main__":
  if sys.argv[1:] == ["--self-test"]:
    sys.exit(self_test())
  if sys.argv[1:]:
    sys.exit(f"availability-check: unknown arguments {' '.join(sys.argv[1:])}; "
             "run with no argument, or --self-test")
  sys.exit(check_package())
