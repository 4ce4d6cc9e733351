"""The Markdown stays true: every relative link and anchor resolves, every scripts/, docs/ and
tests/ path it names exists, nothing points outside the repository (../shared, shared/spec), the
README stays short and starts with the two commands CI runs, and every --flag the docs give etrun
(or etrun-smoke) in a command line is one `--help` shows."""
import os
import re
import subprocess

import pytest

from conftest import ETRUN, ROOT

README_MAX_LINES = 220
FIRST_COMMANDS = ["scripts/setup.sh && scripts/examples/elastic_demo.sh", "scripts/test.sh"]

# Words after `etrun` that start the command (so what follows is the command's, not etrun's).
COMMAND_WORDS = re.compile(r"^(python3?|/usr/bin/python3|\S+\.py|\S+\.sh|hostname|true|/bin/true|"
                           r"sh|bash|env|sleep|nosuchcmd\S*|report|build/etrun-smoke|etrun-smoke)$")
# Flags that appear in an etrun command line in the docs but are not etrun's, with the reason.
NOT_ETRUN_FLAGS = {
    "--epochs": "train.py's own flag in the report example's command (python3 train.py --epochs 90)",
}


def markdown_files():
    """Every tracked Markdown file (every *.md outside build folders when git is not at hand)."""
    try:
        out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
        if out:
            return sorted(os.path.join(ROOT, p) for p in out)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        found += [os.path.join(folder, f) for f in files if f.endswith(".md")]
    return sorted(found)


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def without_code(text):
    """The text with fenced code blocks blanked out (links inside code are not links)."""
    return re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    for line in without_code(read(path)).splitlines():
        m = re.match(r"^#{1,6} (.*)$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links():
    for path in markdown_files():
        for n, line in enumerate(without_code(read(path)).splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                yield path, n, target


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for path, n, target in links():
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        where = f"{rel(path)}:{n}: {target}"
        if not os.path.exists(dest):
            broken.append(where + " (no such file)")
        elif not dest.startswith(ROOT + os.sep):
            broken.append(where + " (outside the repository)")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            broken.append(where + " (no such heading)")
    assert broken == []


NAMED_PATH = re.compile(r"(?<![\w./~$-])((?:scripts|docs|tests)/[\w./-]*)")


def test_every_named_path_exists():
    missing = []
    for path in markdown_files():
        for n, line in enumerate(read(path).splitlines(), 1):
            for name in NAMED_PATH.findall(line):
                name = name.rstrip(".,:;")
                if not os.path.exists(os.path.join(ROOT, name)):
                    missing.append(f"{rel(path)}:{n}: {name}")
    assert missing == []


def test_nothing_points_outside_the_repository():
    outside = [f"{rel(path)}:{n}: {line.strip()}"
               for path in markdown_files()
               for n, line in enumerate(read(path).splitlines(), 1)
               if "../shared" in line or "shared/spec" in line or "shared/DESIGN" in line]
    assert outside == []


def cpp_sources():
    """Every tracked C++ source and header (*.h, *.cc)."""
    out = subprocess.run(["git", "ls-files", "*.h", "*.cc"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    return sorted(os.path.join(ROOT, p) for p in out)


def test_cpp_comments_cite_the_docs_pages_not_the_readme():
    # The README's reference sections moved to docs/ (exit codes, events, usage): a comment that
    # still says "see README" points at a section that is not there. Paths it names must exist.
    stale, missing = [], []
    for path in cpp_sources():
        for n, line in enumerate(read(path).splitlines(), 1):
            if "README" in line:
                stale.append(f"{rel(path)}:{n}: {line.strip()}")
            for name in re.findall(r"(?<![\w./~$-])(docs/[\w.-]+\.md)", line):
                if not os.path.exists(os.path.join(ROOT, name)):
                    missing.append(f"{rel(path)}:{n}: {name}")
    assert stale == [] and missing == []


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = read(os.path.join(ROOT, "README.md"))
    assert len(text.splitlines()) <= README_MAX_LINES
    first_block = re.search(r"^```\w*\n(.*?)^```", text, flags=re.M | re.S).group(1)
    assert first_block.splitlines() == FIRST_COMMANDS


def command_lines():
    """(file, line number, program, text after it) for each etrun or etrun-smoke command line in
    the Markdown: lines of code blocks (joined at a trailing backslash) and inline code spans."""
    for path in markdown_files():
        text = read(path)
        pieces = []  # (line number, text)
        in_code = False
        pending, pending_n = "", 0
        for n, line in enumerate(text.splitlines(), 1):
            if line.startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                if line.rstrip().endswith("\\"):
                    pending, pending_n = pending + line.rstrip()[:-1] + " ", pending_n or n
                    continue
                pieces.append((pending_n or n, pending + line))
                pending, pending_n = "", 0
            else:
                pieces += [(n, span) for span in re.findall(r"`([^`]+)`", line)]
        for n, piece in pieces:
            piece = re.sub(r"^\$ ", "", piece)
            for m in re.finditer(r"(?:^|[\s(;&|])(?:\S*/)?(etrun|etrun-smoke)(?=\s)(.*)", piece):
                yield path, n, m.group(1), m.group(2)


def flags_given(program, rest):
    """The --flags given to the program: up to the command it runs, a shell separator or a
    comment."""
    flags = []
    for word in rest.split():
        if word in ("|", "||", "&&", ";", "&", "#") or word.startswith("#"):
            break
        if program == "etrun" and COMMAND_WORDS.match(word):
            break
        m = re.match(r"^(--[a-z][a-z0-9-]+)", word)
        if m:
            flags.append(m.group(1))
    return flags


def help_text(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def known_flags():
    """program -> every --flag its --help (and its verbs' --help) shows."""
    etrun_help = "".join(help_text([ETRUN] + verb + ["--help"]) for verb in (
        [], ["status"], ["list"], ["scale"], ["dump"], ["report"], ["pool"], ["pool", "start"],
        ["pool", "status"], ["pool", "priority"], ["pool", "stop"], ["pool", "token"]))
    known = {"etrun": set(re.findall(r"--[a-z][a-z0-9-]+", etrun_help))}
    smoke = os.path.join(os.path.dirname(ETRUN), "etrun-smoke")
    if os.access(smoke, os.X_OK):
        known["etrun-smoke"] = set(re.findall(r"--[a-z][a-z0-9_-]+", help_text([smoke, "--help"])))
    return known


def test_the_docs_give_etrun_only_flags_its_help_shows(known_flags):
    assert len(known_flags["etrun"]) > 50  # the help was read
    unknown = []
    checked = 0
    for path, n, program, rest in command_lines():
        if program not in known_flags:
            continue
        for flag in flags_given(program, rest):
            checked += 1
            if flag not in known_flags[program] and flag not in NOT_ETRUN_FLAGS:
                unknown.append(f"{rel(path)}:{n}: {program} {flag}")
    assert checked > 50  # the command lines were found
    assert unknown == []
