"""Reading Swift source without a compiler, for the repository's source checks.

Used by Tools/availability-check and Tools/bounded-waits: the source with comments and string
literals blanked out (so that a word in a comment is not code), brace matching, line numbers,
and the self-test loop both checks run in CI.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence


def blank_comments_and_strings(text: str) -> str:
  """The source with comments and string literals replaced by spaces, newlines kept.

  Handles line and nested block comments, plain, multi-line and raw (`#"..."#`) strings, escapes,
  and interpolations (`\\(...)`, blanked with the string: a wait inside one is not looked at).
  """
  out = list(text)
  i, n = 0, len(text)

  def blank(a: int, b: int) -> None:
    for k in range(a, b):
      if out[k] != "\n":
        out[k] = " "

  while i < n:
    if text.startswith("//", i):
      j = text.find("\n", i)
      j = n if j < 0 else j
      blank(i, j)
      i = j
    elif text.startswith("/*", i):
      depth, j = 1, i + 2
      while j < n and depth:
        if text.startswith("/*", j):
          depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
          depth, j = depth - 1, j + 2
        else:
          j += 1
      blank(i, j)
      i = j
    elif text[i] == '"' or (text[i] == "#" and re.match(r'#+"', text[i:])):
      hashes = len(re.match(r"#*", text[i:]).group(0))
      start = i + hashes
      triple = text.startswith('"""', start)
      quote = '"""' if triple else '"'
      close = quote + "#" * hashes
      escape = "\\" + "#" * hashes
      j = start + len(quote)
      depth = 0
      while j < n:
        if text.startswith(escape + "(", j):
          depth += 1
          j += len(escape) + 1
          continue
        if text.startswith(escape, j):
          j += len(escape) + 1
          continue
        if depth:
          if text[j] == "(":
            depth += 1
          elif text[j] == ")":
            depth -= 1
        elif text.startswith(close, j):
          j += len(close)
          break
        elif not triple and text[j] == "\n":
          break
        j += 1
      blank(i, j)
      i = j
    else:
      i += 1
  return "".join(out)


def matching(code: str, index: int, opening: str = "{", closing: str = "}") -> int:
  """The index of the bracket closing the one at `index` (or the end of the text)."""
  depth = 0
  for k in range(index, len(code)):
    if code[k] == opening:
      depth += 1
    elif code[k] == closing:
      depth -= 1
      if depth == 0:
        return k
  return len(code)


def enclosing_close(code: str, index: int) -> int:
  """The index of the `}` that closes the scope `index` is in (or the end of the text)."""
  depth = 0
  for k in range(index, len(code)):
    if code[k] == "{":
      depth += 1
    elif code[k] == "}":
      if depth == 0:
        return k
      depth -= 1
  return len(code)


def line_numbers(code: str) -> Callable[[int], int]:
  """A function from an index in `code` to its line number (1-based)."""
  starts = [0] + [k + 1 for k, ch in enumerate(code) if ch == "\n"]

  def line_of(index: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
      mid = (lo + hi + 1) // 2
      if starts[mid] <= index:
        lo = mid
      else:
        hi = mid - 1
    return lo + 1

  return line_of


def run_self_tests(tool: str, cases: Sequence[tuple], findings: Callable[..., Sequence]) -> int:
  """Runs each case `(name, *inputs, expected count)`: `findings(*inputs)` must find that many.

  Prints the failures and a summary; returns the exit status.
  """
  failed = 0
  for name, *inputs, expected in cases:
    found = findings(*inputs)
    if len(found) != expected:
      failed += 1
      print(f"FAILED: {name}: expected {expected} finding(s), got {len(found)}")
      for finding in found:
        print(f"  {finding}")
  print(f"{tool} self-test: {len(cases) - failed} of {len(cases)} passed")
  return 1 if failed else 0
