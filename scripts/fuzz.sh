#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a bounded number of inputs each.
#
#   scripts/fuzz.sh [BUDGET]       e.g. scripts/fuzz.sh 30000x (the default)
#
# The budget is a count of executions (go test's -fuzztime Nx), not a duration: with a
# duration, Go 1.26's fuzzing coordinator can fail a target that found nothing, with
# "context deadline exceeded", when a loaded machine keeps a worker busy past the
# deadline (golang.org/issue/75804, fixed in Go 1.27). A count has no deadline to race.
#
# Targets are found by their declarations (func FuzzXxx in *_test.go), so new ones
# are picked up without editing this file. A target that fails leaves its input in
# the package's testdata/fuzz/FuzzXxx/: commit it, and it runs with every `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

budget="${1:-30000x}"
case "$budget" in
*x) ;;
*) echo "fuzz.sh: the budget is a count of executions such as 30000x, not $budget" >&2; exit 2 ;;
esac
go="${GO:-go}"
start=$(date +%s)
failed=()
count=0

# "path/to/file_test.go:12:func FuzzName(" -> "./path/to FuzzName"
targets=$(git ls-files '*_test.go' | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' |
	sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)$#./\1 \2#; s#^[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)$#. \1#' | sort)

while read -r pkg name; do
	[ -n "$name" ] || continue
	count=$((count + 1))
	echo "== $name ($pkg, $budget)"
	if ! "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" "$pkg"; then
		failed+=("$pkg $name")
	fi
done <<< "$targets"

echo "fuzzed $count targets, $budget each, in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	echo "the failing inputs are under each package's testdata/fuzz/: commit them as regression seeds"
	exit 1
fi
