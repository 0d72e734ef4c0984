#!/usr/bin/env bash
# `make pytest` without PYTEST_ARGS: the suites that need no cluster run in a second pytest
# process beside the e2e tests, whose clusters come up one at a time in the first. On two
# cores this takes about the e2e tests' time instead of both added up. The background run's
# output is printed after the e2e run's, whole; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-scripts/uv}
base=$(mktemp -d -t dra-pytest-XXXXXX)
trap 'rm -rf "$base"' EXIT
# Separate base temporary directories: each pytest session wipes its own at start.
"$UV" run --frozen pytest -m "not e2e" --basetemp="$base/unit" -p no:cacheprovider \
    > "$base/unit.log" 2>&1 &
unit=$!
"$UV" run --frozen pytest -m e2e --basetemp="$base/e2e"
e2e_rc=$?
wait "$unit"
unit_rc=$?
echo
echo "===== the suites that need no cluster (ran beside the e2e tests): exit $unit_rc ====="
cat "$base/unit.log"
echo "===== e2e tests: exit $e2e_rc; suites that need no cluster: exit $unit_rc ====="
if [ "$e2e_rc" -ne 0 ]; then exit "$e2e_rc"; fi
exit "$unit_rc"
