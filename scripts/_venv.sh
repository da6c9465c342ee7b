# Sourced by scripts/run and scripts/test: go to the repository root and make sure .venv
# exists and has requirements.txt installed. Needs only Python 3.11+ and bash.

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

if [ ! -x .venv/bin/python ]; then
    python=$(_find_python) || {
        echo "error: HealthBench Studio needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
        exit 1
    }
    echo "Creating .venv with $("$python" --version 2>&1)" >&2
    "$python" -m venv .venv
fi

# The stamp lives inside .venv so that deleting .venv also forgets it. It holds a hash of
# requirements.txt and the interpreter version: install again only when either changes.
_stamp=.venv/.requirements.sha256
_wanted=$(.venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(open("requirements.txt", "rb").read()).hexdigest(), sys.version.split()[0])')
if [ ! -f "$_stamp" ] || [ "$(cat "$_stamp")" != "$_wanted" ]; then
    echo "Installing requirements.txt into .venv" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    echo "$_wanted" >"$_stamp"
fi
unset _stamp _wanted
