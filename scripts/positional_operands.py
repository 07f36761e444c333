#!/usr/bin/env python3
"""Fails where code outside the operand declarations (backends/operands.cpp) reads an op's
operand list by position: b[4], buffers[op.masked ? 2 : 1], plan.operands()[3],
`out = fuse_relu ? 7 : 6`, `output == 3`, f32(2), f(3), b[out + 1]. Operands are bound by name
(BoundOperands, backends/operands.h). Usage: scripts/positional_operands.py [ROOT] [--counts].
Exit 1 with one line per index found; --counts also prints each file's count."""
import pathlib
import re
import sys

SUFFIXES = {".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh"}
SCANNED_DIRS = ["backends", "models", "workloads", "bench", "reports", "tests"]
SKIPPED_DIRS = {"tree"}  # tests/tree/ holds planted failures
EXEMPT = {"backends/operands.cpp"}
NAMES = r"(b|buffers_?|operands_?|ops|specs|spec|in|inputs_?|outputs_?|slots|operand_slots)"
PATTERNS = [
    re.compile(r"(?<!layer\.)\b" + NAMES + r"\[[0-9]+\]"),  # a layer's inputs are not operands
    re.compile(r"\b(b|buffers_?|operands_?|ops|specs|in|inputs_?)\[[^]]*\?[^]]*:[^]]*\]"),
    re.compile(r"operands\(\)(\[|\.at\()[0-9]+"),
    re.compile(r"\b(int|std::size_t|const int|auto) [a-z_]*(out|index|idx)[a-z_]* = [^;]*\? *[0-9]+ *: *[0-9]+"),
    re.compile(r"\b(output|index|operand|i) == [0-9]+\b"),
    re.compile(r"\b(f32|f64|i32)\([0-9]+\)|\b(out|out_index) \+ [0-9]+"),
    re.compile(r"\b[a-z]\([0-9]\)"),  # an accessor lambda over the list: f(3)
]


def count(line):
    return sum(len(p.findall(line)) for p in PATTERNS)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = pathlib.Path(args[0] if args else ".").resolve()
    per_file, lines = {}, {}
    for directory in SCANNED_DIRS:
        for path in sorted((root / directory).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix not in SUFFIXES or relative in EXEMPT or SKIPPED_DIRS & set(path.relative_to(root).parts[:-1]):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                found = count(line)
                if found:
                    per_file[relative] = per_file.get(relative, 0) + found
                    lines.setdefault(relative, []).append(f"{relative}:{number}: {line.strip()}")
    if "--counts" in sys.argv:
        for relative, found in sorted(per_file.items(), key=lambda item: -item[1]):
            print(f"{found:5d} {relative}")
    for relative in sorted(lines):
        for line in lines[relative]:
            print(line)
    total = sum(per_file.values())
    print(f"positional_operands: {total} positional operand indexes outside the declarations")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
