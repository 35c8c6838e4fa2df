#!/usr/bin/env bash
# Install everything the test suite needs (into ./.venv), then run it on every target.
# This is the README's test command; .ci/run calls it on a clean checkout with CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: python3-venv, and chromium for the browser tests (Playwright drives the system Chromium; it
# never downloads a browser). Installed only where missing, so a prepared machine needs no root.
need=()
command -v chromium >/dev/null || need+=(chromium)
python3 -c "import ensurepip" 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=${LLAMAY_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
# [ray]: tests/ray start a local Ray cluster (loopback) and run llamay replicas on it; without the extra they skip
python -m pip install -q -e '.[native,dev,ray]' -r web/requirements-browser.txt
llamay pull --all

echo "== lint"
ruff check .
ruff format --check .

LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
run_target() {  # NAME COMMAND...: run one target, keep its output, remember a failure and go on
    local name=$1 t0=$SECONDS
    shift
    echo "== $name"
    if "$@" 2>&1 | tee "$LOGS/$name.log"; then :; else touch "$LOGS/failed"; echo "!! $name failed"; fi
    echo "$name took $((SECONDS - t0)) s"
}

# the web assets (Pyodide from npm, pure wheels and kernel modules into web/dist), then the same tests/ under
# Pyodide in Node (portable and wasm kernels) and in headless Chromium (a Web Worker), with the cross-target
# checks: Node and Chromium greedy text == native text
web_targets() {
    local t0=$SECONDS
    echo "== web assets"
    if (cd web && npm ci --no-audit --no-fund --loglevel=error) && python web/build.py; then
        echo "web assets took $((SECONDS - t0)) s"
    else
        touch "$LOGS/failed"
        echo "!! web assets failed"
        return 0
    fi
    run_target pyodide-node env LLAMAY_EXPECT_BACKENDS=portable,wasm node web/bin/llamay-web.mjs test -q
    run_target browser env LLAMAY_EXPECT_TARGETS=node,chromium pytest -q -p no:cacheprovider tests/browser
}

# Two lanes, one a core: each target is mostly one busy process, and run one after the other they took ~45 min
# on CI's two cores. The web lane's output is kept and printed after native's.
web_targets >"$LOGS/web.out" 2>&1 &
WEB=$!
run_target native env LLAMAY_EXPECT_BACKENDS=portable,numba,wasm pytest -q -p no:cacheprovider --ignore=tests/browser
echo "== web targets (run beside native; their output follows)"
wait "$WEB" || touch "$LOGS/failed"
cat "$LOGS/web.out"

echo "== pass counts per target"
counts() {  # LOG PATTERN: the counts on the last line of a target's log that matches PATTERN
    grep -E "$2" "$LOGS/$1.log" | tail -1 | grep -oE '[0-9]+ (passed|failed|skipped|errors?|xfailed|xpassed)' |
        paste -sd, - | sed 's/,/, /g'
}
{
    echo "native: $(counts native ' in [0-9.]+s')"
    echo "pyodide-node: $(counts pyodide-node '^pyodide-node:')"
    echo "chromium: $(counts browser '^chromium:')"
    echo "node+chromium: $(counts browser ' in [0-9.]+s')"
} | tee "$LOGS/counts"
awk '{ for (i = 2; i < NF; i++) { k = $(i + 1); sub(/,$/, "", k); if (k ~ /^(passed|failed|skipped)$/) n[k] += $i } }
     END { printf "total: %d passed, %d failed, %d skipped\n", n["passed"], n["failed"], n["skipped"] }' "$LOGS/counts"
[ ! -e "$LOGS/failed" ]
