#!/usr/bin/env python3
"""Checks that every Markdown table of the repository renders as a table.

Usage: tables.py [FILE.md ...]   (no argument: every Markdown file of the repository)

A GitHub-flavoured Markdown table is a header row, a delimiter row (`|---|---|`) and body rows,
with no blank line between them. A row cut off from its table (by a blank line, say) renders
as a line of literal pipes; a row with more or fewer cells than the header loses or pads
cells. Both are reported with the file and line; code blocks are skipped. Exits 1 on any.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DELIMITER = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def cells(row):
    """The cells of a table row: split at pipes that are not escaped."""
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return re.split(r"(?<!\\)\|", row)


def markdown_files():
    skip = {".build", ".git", "node_modules"}
    for folder, folders, files in os.walk(ROOT):
        folders[:] = [f for f in folders if f not in skip and not f.startswith(".build")]
        for name in files:
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def check(path):
    problems = []
    lines = open(path, encoding="utf-8").read().split("\n")
    fenced = False
    block = []  # (line number, text) of consecutive table-like rows

    def finish():
        if not block:
            return
        number, header = block[0]
        if len(block) < 2 or not DELIMITER.match(block[1][1].strip()):
            problems.append(
                "%d: a table row with no header and delimiter row right above it; it renders "
                "as literal pipes (a blank line inside a table?)" % number
            )
        else:
            width = len(cells(header))
            for row_number, row in block[2:]:
                if len(cells(row)) != width:
                    problems.append(
                        "%d: %d cells in a table of %d columns"
                        % (row_number, len(cells(row)), width)
                    )
        block.clear()

    for index, line in enumerate(lines, start=1):
        if line.lstrip().startswith("```"):
            finish()
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.lstrip().startswith("|"):
            block.append((index, line))
        else:
            finish()
    finish()
    return problems


def main():
    files = sys.argv[1:] or sorted(markdown_files())
    failures = 0
    tables = 0
    for path in files:
        for problem in check(path):
            failures += 1
            print("%s:%s" % (os.path.relpath(path, ROOT), problem))
        tables += sum(
            1 for line in open(path, encoding="utf-8") if DELIMITER.match(line.strip()) and "-" in line
        )
    if failures:
        print("tables: %d row(s) would not render as a table" % failures)
        sys.exit(1)
    print("tables: every Markdown table renders as one (%d tables in %d files)" % (tables, len(files)))


if __name__ == "__main__":
    main()
