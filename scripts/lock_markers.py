"""Add to the locks the packages that only an older Python than the locking one needs.

    .venv/bin/python scripts/lock_markers.py      (run by scripts/lock, after pip-compile)

pip-compile resolves for the interpreter it runs on (3.11.7 here) and drops every requirement
whose environment marker is false there, so a lock made on 3.11.7 misses what 3.11.0–3.11.2
need: redis needs `async-timeout` below 3.11.3, and pip with --require-hashes then refuses the
lock on Debian 12's python3.11 (3.11.2). Each package of MARKED is locked alone (pip-compile,
hashes for every file of the release) and written into requirements.txt and
requirements-dev.txt with its marker, so pip installs it where the marker holds and skips it
elsewhere. A version already in the lock is kept (re-locked only with --upgrade).
tests/test_dependencies.py checks that every marker-bound requirement of a locked package that
holds on some Python the project admits is in the locks.
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCKS = ("requirements.txt", "requirements-dev.txt")

# name -> (the requirement to resolve when the lock has none, its marker, who needs it)
MARKED = {
    "async-timeout": ("async-timeout>=4.0.3", 'python_full_version < "3.11.3"', "redis"),
}


def _block(text: str, name: str) -> re.Match[str] | None:
    """The lock's entry for `name`: its pin line, hash lines and `# via` comments."""
    return re.search(rf"^{re.escape(name)}==\S+.*\n(?:[ #].*\n)*", text, flags=re.M | re.I)


def _resolve(requirement: str) -> str:
    """`requirement` locked alone: its pin line and hash lines, as pip-compile writes them."""
    with tempfile.TemporaryDirectory() as folder:
        source, output = Path(folder) / "in.txt", Path(folder) / "out.txt"
        source.write_text(requirement + "\n")
        options = ["--quiet", "--generate-hashes", "--allow-unsafe", "--no-emit-index-url", "--no-emit-find-links"]
        options += ["--no-header", "--no-annotate", "-o", str(output), str(source)]
        # Our own interpreter and arguments.
        subprocess.run([sys.executable, "-m", "piptools", "compile", *options], check=True)  # noqa: S603
        text = output.read_text()
    name = re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0]
    found = _block(text, name)
    if found is None:
        raise SystemExit(f"pip-compile locked no {name} for {requirement!r}")
    return found[0]


def main() -> None:
    texts = {lock: (REPO / lock).read_text() for lock in LOCKS}
    for name, (requirement, marker, needed_by) in MARKED.items():
        pinned = re.search(rf"^{re.escape(name)}==([^ ;\\]+)", texts["requirements.txt"], flags=re.M | re.I)
        block = _resolve(f"{name}=={pinned[1]}" if pinned else requirement)
        pin, hashes = block.split(" \\\n", 1)
        via = f"    # via {needed_by} (below Python 3.11.3; scripts/lock_markers.py)\n"
        entry = f"{pin} ; {marker} \\\n{hashes.rstrip()}\n{via}"
        for lock, text in texts.items():
            old = _block(text, name)
            if old is not None:
                text = text[: old.start()] + text[old.end() :]
            # In its place by name, as pip-compile orders the lock.
            following = next(
                (m for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==", text, flags=re.M) if m[1].lower() > name),
                None,
            )
            at = following.start() if following else len(text)
            texts[lock] = text[:at] + entry + text[at:]
    for lock, text in texts.items():
        (REPO / lock).write_text(text)


if __name__ == "__main__":
    main()
