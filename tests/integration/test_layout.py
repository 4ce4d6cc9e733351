"""Includes point one way (HACKING.md, "The include rule"): each folder includes only the folders
its row of the layout table names, so no two folders include each other. Subfolders count apart.
ALLOWED below is the rule that runs; HACKING.md's table must say the same."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]

# folder -> folders of ours it may include (besides itself); HACKING.md's layout table.
ALLOWED = {
    "cli": None,  # everything below
    "report": {"events"},
    "pool": {"control", "discovery", "events"},
    "slurm": {"discovery"},
    "launcher/mpi": {"launcher", "launcher/process", "control", "discovery", "events", "rendezvous"},
    "launcher/policy": {"launcher", "launcher/process", "control", "discovery", "events",
                        "rendezvous"},
    "launcher/agent": {"launcher/ssh", "launcher", "launcher/process", "launcher/output",
                       "launcher/hang", "launcher/preflight", "discovery", "events"},
    "launcher/hang": {"launcher/process"},
    "launcher/preflight": {"launcher/process", "discovery", "smoke"},
    "launcher/ssh": {"launcher/process", "events"},
    "launcher": {"launcher/process", "launcher/output", "launcher/hang", "launcher/preflight",
                 "control", "discovery", "rendezvous", "events"},
    "launcher/process": {"launcher/output", "discovery", "events"},
    "launcher/output": set(),
    "control": {"rendezvous"},
    "events": set(),
    "discovery": set(),
    "rendezvous": set(),
    "smoke": set(),
    "deps": set(),
}
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def includes():
    for folder in ALLOWED:
        for path in sorted((ROOT / folder).glob("*")):
            if path.suffix not in (".h", ".cc"):
                continue
            for target in INCLUDE.findall(path.read_text()):
                yield folder, str(path.relative_to(ROOT)), str(pathlib.PurePosixPath(target).parent)


def test_every_folder_includes_only_the_folders_below_it():
    wrong = [f"{source} includes {target}/"
             for folder, source, target in includes()
             if target != folder and ALLOWED[folder] is not None and target not in ALLOWED[folder]]
    assert wrong == []


def test_no_two_folders_include_each_other():
    edges = {(folder, target) for folder, _, target in includes() if target != folder}
    assert sorted(e for e in edges if (e[1], e[0]) in edges) == []


def test_every_source_folder_is_in_the_table():
    folders = {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("*/**/*.cc")
               if not str(p.relative_to(ROOT)).startswith(("tests/", "scripts/", "build"))}
    assert folders - set(ALLOWED) == set()


def hacking_table():
    """HACKING.md's layout table as folder -> its "includes" cell read like ALLOWED."""
    text = (ROOT / "HACKING.md").read_text()
    section = text.split("## The include rule", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        folder = cells[0].strip("`").rstrip("/")
        includes = cells[2]
        if includes == "everything below":
            table[folder] = None
        elif includes == "nothing of ours":
            table[folder] = set()
        else:
            table[folder] = {re.sub(r"\s*\(.*\)$", "", part.strip()) for part in includes.split(",")}
    return table


def test_the_hacking_table_is_the_rule():
    assert hacking_table() == ALLOWED


def test_no_folder_of_the_launcher_holds_more_than_twenty_files():
    """launcher/ is split by what its parts do (HACKING.md's table): a folder past about twenty
    files holds two ideas side by side and wants splitting again."""
    crowded = {}
    for folder in ["launcher"] + [f for f in ALLOWED if f.startswith("launcher/")]:
        files = [p for p in (ROOT / folder).glob("*") if p.suffix in (".h", ".cc")]
        if len(files) > 20:
            crowded[folder] = len(files)
    assert crowded == {}
