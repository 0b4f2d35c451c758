"""Helpers shared by the model-evaluation scripts in this folder.

The scripts import it as `from common import fail, run` (Python puts the folder of the script
it runs first on `sys.path`), so they run as `python3 eval/NAME.py` from the repository root.
"""

import subprocess
import sys


def fail(message):
    """Stop with a one-line error (exit status 1)."""
    raise SystemExit(f"error: {message}")


def run(command):
    """Run `command` (a list), return its standard output; stop with its stderr when it fails."""
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:
        fail(f"{command[0]}: {error.strerror}; build it with `cargo build --release` or pass "
             "--keyslice PATH")
    if result.returncode != 0:
        shown = " ".join(map(str, command[:6])) + (" …" if len(command) > 6 else "")
        sys.exit(f"{shown} failed:\n{result.stderr}")
    return result.stdout
