#!/usr/bin/env bash
# Install capplan with its test extras into ./.venv (created if missing) and run the checks:
# ruff (lint), mypy (types), mkdocs (the docs site), pytest (unit + integration). Exits non-zero on any failure,
# including pytest collecting no tests (exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# pdftoppm, pdftotext and pdffonts (poppler-utils) check report pages in the report tests. No
# system CJK font is needed: the Chinese report embeds the subset of WenQuanYi Micro Hei that
# ships inside the package (reports/fontdata/) when fontconfig finds no better one.
# poppler-data (a recommendation of poppler-utils, which --no-install-recommends leaves out)
# lets pdffonts read the CID fonts the page check must report as not embedded: without it
# pdffonts says "Missing language pack for 'Adobe-GB1'" and lists no such font.
# prometheus and promtool (Debian's prometheus package) serve a backfilled synthetic fleet to
# the Prometheus-source tests (tests/profiles/test_prometheus.py), which skip without them;
# the plan's alert rules are checked with promtool (tests/planner/ops), which fail without it.
missing=()
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
[ -d /usr/share/poppler/cMap ] || missing+=(poppler-data)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
# nginx (Debian's package; run by the tests as a plain child process with its own config) is
# the real load balancer of `capplan verify`'s integration test, which skips without it.
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || missing+=(nginx)
# iproute2's `ip netns` makes the separate hosts of the remote-worker test
# (tests/integration/test_netns_workers.py: master, workers and target each in a network
# namespace of its own); that test needs root and fails, not skips, without them.
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
if [ "${#missing[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      echo "warning: could not install ${missing[*]}; report tests fail, Prometheus tests skip" >&2
  else
    echo "warning: ${missing[*]} missing and cannot be installed here; report tests will fail" \
      "and the Prometheus-source tests will skip" >&2
  fi
fi

# Azurite (Microsoft's Azure Storage emulator, the npm package; node and npm come with the
# image or Debian's nodejs/npm) serves az:// to the object-storage tests
# (tests/profiles/test_remote_emulators.py, testkit/cloud_emulators.py) with
# CAPPLAN_LONG_TESTS=1, installed once per machine outside the checkout (about 2 minutes);
# gs:// uses fake-gcs-server from the test extras, in every run.
AZURITE_VERSION=3.37.0
export AZURITE_DIR="${AZURITE_DIR:-$HOME/.cache/capplan-test/azurite-$AZURITE_VERSION}"
if [ "${CAPPLAN_LONG_TESTS:-}" = 1 ] &&
  [ ! -f "$AZURITE_DIR/node_modules/azurite/dist/src/blob/main.js" ]; then
  if command -v npm >/dev/null 2>&1; then
    mkdir -p "$AZURITE_DIR"
    npm install --prefix "$AZURITE_DIR" --no-audit --no-fund --loglevel=error \
      "azurite@$AZURITE_VERSION" >/dev/null ||
      echo "warning: could not install Azurite; the az:// tests fail in CI, skip elsewhere" >&2
  else
    echo "warning: npm is missing: the az:// tests fail in CI, skip elsewhere" >&2
  fi
fi

echo "== ruff"
.venv/bin/ruff check contracts planner profiles locustfiles reports capplan testkit tests bench scripts
echo "== mypy"
.venv/bin/mypy
echo "== mkdocs (the documentation site; warnings are errors: broken links, pages off the nav)"
# Not -q: it hides the warnings from --strict's count, and a broken link would pass.
site_dir="$(mktemp -d)"
if ! NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict -d "$site_dir" >"$site_dir.log" 2>&1; then
  grep -v '^INFO' "$site_dir.log" >&2
  rm -rf "$site_dir" "$site_dir.log"
  exit 1
fi
rm -rf "$site_dir" "$site_dir.log"
echo "== pytest"
# With no arguments: two pytest lanes side by side on the two cores, the tests that time
# real servers on the wall clock (marked `wall_clock` by tests/conftest.py) one after another
# in one, everything else in the other, then a few wall-clock files; each prints its own
# lines, prefixed. With arguments
# (or CAPPLAN_TEST_PROCESSES=1): one process, the arguments passed to pytest.
# Exit code 5 (no tests collected) fails either way.
run_pytest() {
  set +e
  .venv/bin/python -m pytest -p no:cacheprovider "$@"
  local rc=$?
  set -e
  if [ "$rc" = 5 ]; then
    echo "pytest collected no tests: failing" >&2
    return 1
  fi
  return "$rc"
}
if [ "$#" -gt 0 ] || [ "${CAPPLAN_TEST_PROCESSES:-2}" = 1 ]; then
  run_pytest "$@"
  exit $?
fi
logdir="$(mktemp -d)"
prefixed() {  # NAME ARGS...: pytest ARGS, each line prefixed [NAME]; the exit code in NAME.rc
  local name=$1
  shift
  { rc=0; run_pytest "$@" || rc=$?; echo "$rc" >"$logdir/$name.rc"; } 2>&1 | sed -u "s/^/[$name] /"
}
# The second lane runs a few wall-clock files (free ports only) after the CPU-only tests, so
# the lanes end together (tests/conftest.py: SECOND_LANE_PATHS).
prefixed wall-clock -m "wall_clock and not second_lane" &
{ prefixed cpu -m "not wall_clock"; prefixed second-lane -m "wall_clock and second_lane"; } &
wait
wall_rc=$(cat "$logdir/wall-clock.rc")
cpu_rc=$(cat "$logdir/cpu.rc")
second_rc=$(cat "$logdir/second-lane.rc")
rm -rf "$logdir"
echo "== pytest: the wall-clock tests exit $wall_rc, the CPU-only ones $cpu_rc, the second" \
  "lane's wall-clock ones $second_rc"
[ "$wall_rc" = 0 ] && [ "$cpu_rc" = 0 ] && [ "$second_rc" = 0 ]
