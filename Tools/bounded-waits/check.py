#!/usr/bin/env python3
"""Every wait in OrderlyPostgres ends by a deadline the library owns, or by cancellation.

A worker that waits for ever on the database holds nothing, delivers nothing and looks healthy
(PostgresNIO 1.33 never answers a query written to a connection that has just closed). The rule
(CONTRIBUTING.md, "Nothing waits forever") is that each statement runs inside a deadline. This
script checks it over the module's source, so that a new await that breaks it fails CI:

- a *database wait* (a PostgresNIO call that waits for the server: `client.query(`,
  `withConnection`, `connect(`, `listen(`, `execute(`, and this module's helpers over them)
  must sit inside the closure given to `withDeadline(...)` or `bounded(...)` (the worker's
  form), or inside a function marked with the line `// deadline: the caller's` right above its
  declaration (its doc comment and attributes may come between). A marked function's name
  becomes a database wait too: every call of it is checked the same way, so the deadline is
  always somewhere up the call chain in this module.
- a *continuation* (`withCheckedContinuation` and its kin) must say who resumes it and by when,
  in a comment containing `resumed by` within the five lines above it.

What it does not check: waits outside this module (a caller's own), `await` on a task's value,
or sleeps (a sleep ends by itself). It reads the source, stripped of comments and strings, and
matches braces; it does not type-check.

  python3 Tools/bounded-waits/check.py              # exit 1 on a wait outside a deadline
  python3 Tools/bounded-waits/check.py --self-test  # the checker's own cases
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "swift-source"))
from swift_source import (  # noqa: E402
  blank_comments_and_strings,
  line_numbers,
  matching,
  run_self_tests,
)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODULE = os.path.join(ROOT, "Modules", "OrderlyPostgres")
MARK = "// deadline: the caller's"

# PostgresNIO's waits, and this module's own helpers that wrap them (Transaction.swift): every
# one is a round trip to the server, or a wait for a pooled connection.
DATABASE_WAITS = [
  r"\bwithConnection\s*[({]",
  r"\bPostgresConnection\s*\.\s*connect\s*\(",
  r"\.\s*listen\s*\(",
  r"\b(client|connection|self)\s*\.\s*(query|execute|prepare|withTransaction|close)\s*\(",
  r"\.\s*(checkedQuery|committedQuery|checkedExecute|committedExecute|transaction)\s*\(",
]
CONTINUATIONS = r"\bwith(Checked|Unsafe)(Throwing)?Continuation\b"
DEADLINES = r"\b(withDeadline|bounded)\s*\("


def deadline_ranges(code: str) -> list[tuple[int, int]]:
  """Spans inside the closures given to withDeadline(...) or bounded(...)."""
  ranges = []
  for m in re.finditer(DEADLINES, code):
    # The declaration of `bounded` itself is not a call.
    if re.search(r"\bfunc\s+$", code[max(0, m.start() - 20):m.start()]):
      continue
    close = matching(code, m.end() - 1, "(", ")")
    inside = code[m.end():close]
    # A closure written inside the parentheses, or trailing them.
    brace = inside.find("{")
    if brace >= 0:
      start = m.end() + brace
      ranges.append((start, matching(code, start, "{", "}")))
    rest = re.match(r"\s*\{", code[close + 1:])
    if rest:
      start = close + 1 + rest.end() - 1
      ranges.append((start, matching(code, start, "{", "}")))
  return ranges


def marked_functions(text: str, code: str) -> list[tuple[str, int, int]]:
  """(name, body start, body end) of each function marked as running under its caller's
  deadline."""
  found = []
  lines = text.split("\n")
  offsets = [0]
  for line in lines:
    offsets.append(offsets[-1] + len(line) + 1)
  for number, line in enumerate(lines):
    if line.strip() != MARK:
      continue
    # The declaration: the next line that declares a function (doc comments and attributes
    # may come between).
    for following in range(number + 1, min(number + 40, len(lines))):
      m = re.search(r"\bfunc\s+(\w+)", code[offsets[following]:offsets[following + 1]])
      if m:
        start = code.find("{", offsets[following])
        found.append((m.group(1), start, matching(code, start, "{", "}")))
        break
      stripped = lines[following].strip()
      if stripped and not stripped.startswith(("///", "//", "@")):
        break
  return found


def check_source(path: str, text: str, helpers: set[str]) -> list[str]:
  """Findings in one file: each wait outside a deadline, each continuation without a word."""
  code = blank_comments_and_strings(text)
  covered = deadline_ranges(code) + [(a, b) for _, a, b in marked_functions(text, code)]
  line_of = line_numbers(code)

  source = text.split("\n")
  findings = []
  # A helper is called bare, or on self, a client, a connection, a worker or a type.
  patterns = DATABASE_WAITS + [
    r"(?:(?<![\w.])|\b(?:self|client|connection|worker|[A-Z]\w*)\s*\.\s*)" + re.escape(name)
    + r"\s*\("
    for name in helpers
  ]
  seen = set()
  for pattern in patterns:
    for m in re.finditer(pattern, code):
      # A declaration is not a wait.
      if re.search(r"\bfunc\s+\w*$", code[max(0, m.start() - 40):m.start() + 1]):
        continue
      if re.search(r"\bfunc\s+$", code[max(0, m.start() - 20):m.start()]):
        continue
      if any(a <= m.start() <= b for a, b in covered):
        continue
      line = line_of(m.start())
      if line in seen:
        continue
      seen.add(line)
      findings.append(f"{path}:{line}: a database wait outside any deadline: "
                      f"{source[line - 1].strip()}")
  for m in re.finditer(CONTINUATIONS, code):
    line = line_of(m.start())
    above = "\n".join(source[max(0, line - 6):line])
    if "resumed by" not in above:
      findings.append(f"{path}:{line}: a continuation that does not say who resumes it "
                      f"(a comment with 'resumed by' in the five lines above): "
                      f"{source[line - 1].strip()}")
  return sorted(findings, key=lambda f: int(f.split(":")[1]))


def check_files(files: dict[str, str]) -> list[str]:
  helpers = set()
  for text in files.values():
    helpers |= {name for name, _, _ in marked_functions(text, blank_comments_and_strings(text))}
  findings = []
  for path, text in sorted(files.items()):
    findings += check_source(path, text, helpers)
  return findings


def check_module() -> int:
  files = {}
  for folder, _, names in os.walk(MODULE):
    for name in sorted(names):
      if name.endswith(".swift"):
        full = os.path.join(folder, name)
        with open(full, encoding="utf-8") as f:
          files[os.path.relpath(full, ROOT)] = f.read()
  findings = check_files(files)
  for finding in findings:
    print(finding)
  if findings:
    print(f"bounded-waits: {len(findings)} wait(s) in OrderlyPostgres with no deadline the "
          "library owns. Run the statement inside withDeadline(...) (a worker's inside "
          f"bounded(...)), or mark a helper '{MARK}' and call it only under one; say who "
          "resumes a continuation. See CONTRIBUTING.md, 'Nothing waits forever'.",
          file=sys.stderr)
    return 1
  print(f"bounded-waits: {len(files)} files of OrderlyPostgres: every database wait is under a "
        "deadline, every continuation says who resumes it")
  return 0


SELF_TESTS: list[tuple[str, dict[str, str], int]] = [
  ("a query outside any deadline",
   {"a.swift": "func f() async throws {\n  try await client.query(\"SELECT 1\", logger: l)\n}\n"}, 1),
  ("a query inside withDeadline",
   {"a.swift": "func f() async throws {\n  try await withDeadline(.seconds(5)) {\n"
               "    try await client.query(\"SELECT 1\", logger: l)\n  }\n}\n"}, 0),
  ("a statement inside the worker's bounded(...) closure, trailing",
   {"a.swift": "func f() async throws {\n  try await bounded(\"x\", progress: true) { () -> Int in\n"
               "    try await client.checkedExecute(s, logger: l) { _ in 1 }\n  }\n"
               "  try await client.committedQuery(q, logger: l) { _ in }\n}\n"}, 1),
  ("a marked helper, and its calls",
   {"a.swift": "// deadline: the caller's\nfunc helper() async throws {\n"
               "  try await client.query(q, logger: l)\n}\n"
               "func good() async throws {\n  try await withDeadline(.seconds(1)) { try await helper() }\n}\n"
               "func bad() async throws {\n  try await self.helper()\n}\n"}, 1),
  ("a marked helper with a doc comment between the mark and the declaration",
   {"a.swift": "// deadline: the caller's\n/// Docs.\n@discardableResult\nfunc h() async throws {\n"
               "  try await connection.query(q, logger: l)\n}\n"}, 0),
  ("a helper's name called on another value is not the helper",
   {"a.swift": "// deadline: the caller's\nstatic func prepare() async throws {\n"
               "  try await connection.query(q, logger: l)\n}\n"
               "func f() throws {\n  let p = try codec.prepare(m)\n}\n"
               "func g() async throws {\n  try await Schema.prepare()\n}\n"}, 1),
  ("waits in comments and strings are not waits",
   {"a.swift": "// client.query(\"x\")\nlet s = \"client.query(\\(x))\"\n"}, 0),
  ("a continuation without a word, and one with",
   {"a.swift": "func f() async {\n  await withCheckedContinuation { c in c.resume() }\n"
               "  // resumed by: the bell's ring or the task's cancellation\n"
               "  await withCheckedContinuation { c in c.resume() }\n}\n"}, 1),
  ("withConnection and listen outside a deadline",
   {"a.swift": "func f() async throws {\n  try await client.withConnection { c in\n"
               "    try await c.listen(on: \"x\") { _ in }\n  }\n}\n"}, 2),
]


def self_test() -> int:
  return run_self_tests("bounded-waits", SELF_TESTS, check_files)


if __name__ == "__main__":
  if sys.argv[1:] == ["--self-test"]:
    sys.exit(self_test())
  if sys.argv[1:]:
    sys.exit("bounded-waits: run with no argument, or --self-test")
  sys.exit(check_module())
