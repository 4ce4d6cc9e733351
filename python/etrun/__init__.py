"""etrun, a horovodrun-compatible launcher for distributed training, installed from its wheel.

The launcher is a native program: the wheel installs it (with etrun-agent and etrun-smoke) into
the environment's bin folder, beside python, and its discovery scripts, examples and man page
under share/ there, the same tree `cmake --install --prefix` makes. This package only finds that
program, for `python -m etrun` and for Python code that wants to start one:

    subprocess.run([etrun.binary(), "-np", "2", "python", "train.py"])
"""
import importlib.metadata
import os
import sys
import sysconfig

__all__ = ["binary", "main", "__version__"]

try:
    __version__ = importlib.metadata.version("etrun")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"


def binary(name="etrun"):
    """The absolute path of one of the wheel's programs: etrun, etrun-agent or etrun-smoke."""
    try:
        files = importlib.metadata.distribution("etrun").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    # The wheel's RECORD names them relative to site-packages (../../../bin/etrun in a venv,
    # elsewhere with --user or --prefix), so this finds them wherever pip put the scripts.
    for path in files:
        if path.name == name and path.parent.name == "bin":
            found = os.path.abspath(str(path.locate()))
            if os.access(found, os.X_OK):
                return found
    fallback = os.path.join(sysconfig.get_path("scripts"), name)
    if os.access(fallback, os.X_OK):
        return fallback
    raise FileNotFoundError(
        f"etrun: error: the {name} program of the etrun package is not installed where pip puts "
        f"scripts ({sysconfig.get_path('scripts')}): reinstall it with "
        f"`{os.path.basename(sys.executable)} -m pip install --force-reinstall etrun`")


def main(argv=None):
    """Runs etrun with argv (default: this process's arguments) in place of this process."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        program = binary("etrun")
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(program, [program] + args)
    except OSError as error:
        print(f"etrun: error: cannot run {program}: {error.strerror}: reinstall the etrun package",
              file=sys.stderr)
        return 127
