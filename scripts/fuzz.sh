#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a short time each.
#
#   scripts/fuzz.sh [DURATION]     e.g. scripts/fuzz.sh 10s (the default)
#
# Targets are found by their declarations (func FuzzXxx in *_test.go), so new ones
# are picked up without editing this file. A target that fails leaves its input in
# the package's testdata/fuzz/FuzzXxx/: commit it, and it runs with every `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:-10s}"
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
	echo "== $name ($pkg, $duration)"
	if ! "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$duration" "$pkg"; then
		failed+=("$pkg $name")
	fi
done <<< "$targets"

echo "fuzzed $count targets for $duration each in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	echo "the failing inputs are under each package's testdata/fuzz/: commit them as regression seeds"
	exit 1
fi
