#!/usr/bin/env bash
# Creates (once, cached outside the repo) a Python venv with the official MCP
# Python SDK (PyPI package `mcp`) for tests/mcp/mcp_python.rs, and prints the
# venv's python on standard output (everything else goes to stderr):
#
#   APTIX_TEST_MCP_PYTHON="$(./scripts/mcp-python.sh)"
#
# * Installs exactly tests/mcp_python/requirements.txt (`mcp==2.3.0` and its
#   dependencies, all pinned) into ${XDG_CACHE_HOME:-$HOME/.cache}/aptix/mcp-python-venv,
#   about 20 s the first time; a venv installed from the same requirements
#   is reused (well under a second), another one is rebuilt.
# * Needs python3 >= 3.10 with the venv module (Debian: python3-venv).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQUIREMENTS="$ROOT/tests/mcp_python/requirements.txt"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/aptix"
VENV="$CACHE/mcp-python-venv"
PYTHON="$VENV/bin/python"
STAMP="$VENV/aptix-requirements.sha256"

die() { printf 'mcp-python: %s\n' "$*" >&2; exit 1; }

[[ -f $REQUIREMENTS ]] || die "$REQUIREMENTS is missing"
command -v python3 >/dev/null || die "python3 is needed"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    die "python3 >= 3.10 is needed (the mcp package requires it); found $(python3 --version 2>&1)"

WANT=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$REQUIREMENTS")

if [[ ! -x $PYTHON || ! -f $STAMP || $(cat "$STAMP") != "$WANT" ]]; then
    printf 'mcp-python: installing %s into %s\n' "$(grep '^mcp==' "$REQUIREMENTS")" "$VENV" >&2
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    python3 -m venv "$VENV" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$PYTHON" -m pip install -q --disable-pip-version-check -r "$REQUIREMENTS" >&2 ||
        die "pip install -r $REQUIREMENTS failed"
    "$PYTHON" -c 'import mcp.client.session' >&2 || die "mcp does not import in $VENV"
    printf '%s\n' "$WANT" >"$STAMP"
fi
printf '%s\n' "$PYTHON"
