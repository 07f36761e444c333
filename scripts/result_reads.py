#!/usr/bin/env python3
"""Fails where C++ outside tests/ reads a report result's status or statistics as JSON text:
a comparison with a status name ("passed", "failed", "skipped", "unimplemented") or an index
of ["stats"] / ["median_s"]. A result is read once, typed, by reports/result_record.cpp (the
reader, exempt). Usage: scripts/result_reads.py [ROOT]. Exit 1 with one line per read found."""
import pathlib
import re
import sys

SUFFIXES = {".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh"}
SKIPPED_DIRS = {"tests", ".git", "build", "__pycache__"}
EXEMPT = {"reports/result_record.cpp"}
PATTERNS = [
    re.compile(r'\[\s*"status"\s*\]\s*[!=]='),
    re.compile(r'[!=]=\s*"(passed|failed|skipped|unimplemented)"'),
    re.compile(r'\.value\(\s*"status"'),
    re.compile(r'\[\s*"stats"\s*\]\s*\['),
    re.compile(r'\[\s*"median_s"\s*\]\s*(\.get|==|!=|<|>|\))'),
]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.suffix not in SUFFIXES or SKIPPED_DIRS & set(relative.parts[:-1]):
            continue
        if relative.as_posix() in EXEMPT:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(p.search(line) for p in PATTERNS):
                found.append(f"{relative}:{number}: {line.strip()}")
    for line in found:
        print(line)
    print(f"result_reads: {len(found)} reads of a result's status or stats outside the reader")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
