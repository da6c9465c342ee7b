# Sourced by scripts/run and scripts/test: go to the repository root and make sure .venv
# exists and has both locks installed, requirements.txt (runtime) and requirements-dev.txt
# (development and tests). Needs only Python 3.11+ and bash.

cd "$(dirname "${BASH_SOURCE[0]}")/.."

_find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# scripts/run and scripts/test may start at the same moment in a fresh checkout: one of them
# sets up .venv while the other waits, instead of two pip runs writing into it at once. The
# lock is held on file descriptor 9 until the end of the set-up below.
exec 9>.venv.lock
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

if [ ! -x .venv/bin/python ]; then
    python=$(_find_python) || {
        echo "error: HealthBench Studio needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
        exit 1
    }
    echo "Creating .venv with $("$python" --version 2>&1)" >&2
    "$python" -m venv .venv
fi

# The stamp lives inside .venv so that deleting .venv also forgets it. It holds a hash of
# both lock files and the interpreter version: install again only when one of them changes.
_stamp=.venv/.requirements.sha256
_wanted=$(.venv/bin/python -c 'import hashlib, sys
h = hashlib.sha256()
for name in ("requirements.txt", "requirements-dev.txt"):
    h.update(hashlib.sha256(open(name, "rb").read()).digest())
print(h.hexdigest(), sys.version.split()[0])')
if [ ! -f "$_stamp" ] || [ "$(cat "$_stamp")" != "$_wanted" ]; then
    echo "Installing requirements.txt and requirements-dev.txt into .venv" >&2
    # --require-hashes: every file pip downloads must match a hash in the locks, so a
    # replaced or tampered upload fails the install instead of running. It needs every line
    # of both files pinned with ==, hashed, and with all dependencies listed, which is what
    # pip-compile --generate-hashes --allow-unsafe writes (scripts/lock). Packages in both locks
    # carry the same version (requirements-dev.txt is compiled with requirements.txt as a constraint).
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes \
        -r requirements.txt -r requirements-dev.txt
    # Cheap, and catches a lock that was edited by hand into an inconsistent set.
    if ! _check=$(.venv/bin/python -m pip check 2>&1); then
        echo "$_check" >&2
        exit 1
    fi
    echo "$_wanted" >"$_stamp"
fi
unset _stamp _wanted _check
# Set-up done: let a waiting script go on (it finds the stamp and installs nothing).
exec 9>&-
