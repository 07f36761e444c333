#!/usr/bin/env python3
"""trainbench against PyTorch, from reports taken in alternated rounds.

Usage: peer_ratios.py DIR
  DIR holds round-N-trainbench*.json (trainbench's reports) and round-N-pytorch*.json
  (scripts/pytorch_reference.py's), N = 1, 2, ... Prints a markdown table: per case (model,
  batch, dtype), trainbench's samples/s and each PyTorch memory format's (medians over the
  rounds), trainbench over PyTorch's best format, and that ratio in each round. A case that did
  not pass shows its status and reason instead of a speed.
"""
import collections
import json
import pathlib
import re
import statistics
import sys


def case_key(result):
    """resnet50-train batch=32 dtype=f32: the words both sides' workload lines share."""
    words = result["workload"].split()
    batch = next((w for w in words if w.startswith("batch=")), "")
    return f"{words[0]} {batch} dtype={result['dtype']}".replace("  ", " ")


def side_of(result):
    """'trainbench' or PyTorch's memory format."""
    match = re.search(r"memory_format=(\w+)", result["backend"])
    if not result["backend"].startswith("pytorch"):
        return "trainbench"
    if not match:
        return "PyTorch"
    return "PyTorch " + {"contiguous": "NCHW"}.get(match.group(1), match.group(1))


def read_rounds(folder):
    """{case: {side: {round: samples/s or a 'status: reason' string}}}."""
    table = collections.defaultdict(lambda: collections.defaultdict(dict))
    for path in sorted(pathlib.Path(folder).glob("round-*.json")):
        round_number = int(path.name.split("-")[1])
        for result in json.loads(path.read_text())["results"]:
            side = side_of(result)
            if result["status"] == "passed":
                value = result["metrics"]["samples_per_s"]
            else:
                value = f"{result['status']}: {result.get('reason', '')}"
            table[case_key(result)][side][round_number] = value
    return table


def speed(values):
    """The median over the rounds, or the first round's status when one did not pass."""
    failed = [v for v in values.values() if isinstance(v, str)]
    return failed[0] if failed else statistics.median(values.values())


def row(case, sides, formats):
    ours = sides.get("trainbench", {})
    ours_speed = speed(ours) if ours else "not run"
    cells = [case, cell(ours_speed)]
    best = {}
    for name in formats:
        values = sides.get(name, {})
        cells.append(cell(speed(values)) if values else "not run")
        for round_number, value in values.items():
            if not isinstance(value, str):
                best[round_number] = max(best.get(round_number, 0), value)
    if isinstance(ours_speed, str) or not best:
        return "| " + " | ".join(cells + ["-", "-"]) + " |"
    ratio = ours_speed / statistics.median(best.values())
    per_round = [ours[r] / best[r] for r in sorted(best) if r in ours]
    cells += [f"{ratio:.2f}x", ", ".join(f"{r:.2f}" for r in per_round)]
    return "| " + " | ".join(cells) + " |"


def cell(value):
    return value if isinstance(value, str) else f"{value:.2f}"


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    table = read_rounds(argv[1])
    if not table:
        print(f"peer_ratios: no round-N-*.json reports in {argv[1]}", file=sys.stderr)
        return 1
    formats = sorted({side for sides in table.values() for side in sides} - {"trainbench"})
    print("| case | trainbench samples/s | " + " | ".join(f"{f} samples/s" for f in formats)
          + " | trainbench / PyTorch's best | each round |")
    print("|---" * (4 + len(formats)) + "|")
    for case in sorted(table):
        print(row(case, table[case], formats))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
