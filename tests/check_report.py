#!/usr/bin/env python3
"""Checks a run's report.md as a reader would meet it: every section is there, every
link and image is a relative path that resolves, every SVG parses as XML with an <svg>
root, code fences close, and each table's rows have as many cells as its header.
Prints what is wrong and exits 1, or exits 0.

    python3 tests/check_report.py RUN/report.md
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

SECTIONS = ["# Report: ", "## Commands", "## Machine", "## Model and data", "## Time and throughput",
            "## Curves", "## Task scores", "## Samples"]


def cells(row):
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def main():
    path = sys.argv[1]
    here = os.path.dirname(os.path.abspath(path))
    text = open(path, encoding="utf-8").read()
    problems = []
    lines = text.split("\n")
    for s in SECTIONS:
        if not any(line.startswith(s) for line in lines):
            problems.append(f"no section '{s}'")
    fence, prose = None, []
    for line in lines:
        m = re.match(r"^(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            prose.append(line)
    if fence is not None:
        problems.append("a code block is not closed")
    table = None
    for line in prose + [""]:
        if line.startswith("|"):
            if table is None:
                table = cells(line)
            elif cells(line) != table:
                problems.append(f"a table row has {cells(line)} cells, its header {table}: {line}")
        else:
            table = None
    svgs = 0
    for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", "\n".join(prose)):
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            problems.append(f"link {target} is not relative")
            continue
        file = os.path.join(here, target)
        if not os.path.isfile(file):
            problems.append(f"link {target} does not resolve")
        elif target.endswith(".svg"):
            try:
                root = ET.parse(file).getroot()
                assert root.tag.endswith("svg"), root.tag
                svgs += 1
            except Exception as e:  # noqa: BLE001  (any parse failure is the finding)
                problems.append(f"{target} is not an SVG: {e}")
    for p in problems:
        print("report:", p)
    print(f"{path}: {len(lines)} lines, {svgs} SVGs parsed" + ("" if problems else ", fine"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
