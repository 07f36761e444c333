#!/usr/bin/env python3
"""Lists the C++ functions over 80 lines outside tests/ and build output, and fails for one that
has no reason to be one piece: a comment line containing "One piece:" and the reason, in the
comment block right above the function (above its template line, if any).
Counts from the line of the function's name to its closing brace, on clang-formatted code.
Usage: scripts/long_functions.py [--report-only PREFIX ...] [ROOT]. PREFIX (e.g. models/) is
listed but not failed. Exit 1 for a long function without the reason."""
import argparse
import pathlib
import re
import sys

LIMIT = 80
MARKER = "One piece:"
SUFFIXES = {".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh"}
SKIPPED_DIRS = {"tests", ".git", "__pycache__"}
SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*\"\"")
NAME = re.compile(r"(~?[A-Za-z_]\w*|operator\s*(?:\(\)|[^\s(]+))\s*(?:<[^()]*>)?\s*$")


def blank_code(text):
    """The text with comments, string and character literals and preprocessor lines turned into
    spaces (newlines kept), so braces and parentheses are the code's own."""
    out = list(text)
    i, n = 0, len(text)

    def blank(start, end):
        for j in range(start, min(end, n)):
            if out[j] != "\n":
                out[j] = " "

    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            end = i
            while True:  # a directive runs on through backslash continuations
                nl = text.find("\n", end)
                nl = n if nl < 0 else nl
                if nl > 0 and text[nl - 1] == "\\" and nl < n:
                    end = nl + 1
                    continue
                break
            blank(i, nl)
            i = nl
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            nl = text.find("\n", i)
            nl = n if nl < 0 else nl
            blank(i, nl)
            i = nl
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            open_paren = text.find("(", i)
            delimiter = ")" + text[i + 2 : open_paren] + '"'
            end = text.find(delimiter, open_paren)
            end = n if end < 0 else end + len(delimiter)
            blank(i + 2, end - 1)
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def matching(code, start, opening, closing):
    """Index just past the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == opening:
            depth += 1
        elif code[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def top_level(header):
    """The header with what is inside parentheses left out: `f(int a) : b(2)` -> `f() : b()`."""
    out, depth = [], 0
    for c in header:
        if c == "(":
            depth += 1
            if depth == 1:
                out.append("()")
        elif c == ")":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def function_name(header):
    """The name before the parameter list of a function header, or None."""
    depth = 0
    for i, c in enumerate(header):
        if c == "(" and depth == 0:
            match = NAME.search(header[:i])
            if match and match.group(1) not in {"if", "for", "while", "switch", "catch", "return"}:
                return match.group(1), match.start(1)
            return None
        depth += c == "("
        depth -= c == ")"
    return None


def in_initializer_list(header):
    """Whether a header ends inside a constructor's member initializer list (`) : a_(1), b_`)."""
    flat = top_level(header)
    return re.search(r"\)\s*(?:noexcept\s*)?:(?!:)", flat) is not None


def functions(code):
    """(name, name offset, body end offset) for every function defined at namespace or class
    scope; bodies are not searched for more."""
    found = []
    i, header_start, n = 0, 0, len(code)
    while i < n:
        c = code[i]
        if c in ";}":
            header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            flat = top_level(header)
            if SCOPE.search(flat) and "=" not in flat:
                header_start = i + 1  # a namespace or class: look inside
            elif in_initializer_list(header) and re.search(r"[\w>]\s*$", header):
                i = matching(code, i, "{", "}")  # a member's braced initializer
                continue
            else:
                end = matching(code, i, "{", "}")
                named = function_name(header) if "(" in header and "=" not in flat else None
                if named:
                    found.append((named[0], header_start + named[1], end))
                i = header_start = end
                continue
        i += 1
    return found


def reason_above(lines, index):
    """Whether the comment block right above line `index` (0-based) gives the reason."""
    j = index - 1
    while j >= 0 and lines[j].lstrip().startswith("template"):
        j -= 1
    while j >= 0 and lines[j].lstrip().startswith("//"):
        if MARKER in lines[j]:
            return True
        j -= 1
    return False


def long_functions(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    code = blank_code(text)
    lines = text.splitlines()
    for name, start, end in functions(code):
        first = code.count("\n", 0, start)
        last = code.count("\n", 0, end - 1)
        length = last - first + 1
        if length > LIMIT:
            # The reason sits above the signature, whose first line may precede the name's.
            top = first
            while top > 0 and lines[top - 1].strip() and not lines[top - 1].lstrip().startswith(
                ("//", "}", "#")
            ) and not lines[top - 1].rstrip().endswith((";", "{", "}")):
                top -= 1
            yield first + 1, name, length, reason_above(lines, top)


def sources(root):
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        if relative.parts[0].startswith("build") or SKIPPED_DIRS & set(relative.parts[:-1]):
            continue
        yield relative


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("--report-only", action="append", default=[], metavar="PREFIX")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    failures = total = 0
    for relative in sources(root):
        for line, name, length, reasoned in long_functions(root / relative):
            total += 1
            report_only = any(relative.as_posix().startswith(p) for p in args.report_only)
            if reasoned:
                verdict = "one piece (reason given)"
            elif report_only:
                verdict = "no reason (reported only)"
            else:
                verdict = "no reason"
                failures += 1
            print(f"{relative}:{line}: {name}: {length} lines, {verdict}")
    print(f"long_functions: {total} over {LIMIT} lines, {failures} without a reason")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
