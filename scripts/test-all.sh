#!/usr/bin/env bash
# Install everything the test suite needs (into ./.venv), then run it on every target.
# This is the README's test command; .ci/run calls it on a clean checkout with CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=${LLAMAY_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[native,dev]'
llamay pull --all

echo "== lint"
ruff check .
ruff format --check .

echo "== native suite (portable and numba backends)"
LLAMAY_EXPECT_BACKENDS=portable,numba,wasm pytest -q -p no:cacheprovider
