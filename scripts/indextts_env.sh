#!/usr/bin/env bash
# indextts_env.sh builds a self-contained Python environment for dubstudio's IndexTTS
# host on a machine with internet access, and unpacks it on a studio machine without.
#
# A uv virtual environment (.venv of the index-tts checkout) cannot simply be copied: its
# pyvenv.cfg names the base interpreter by absolute path (uv's managed Python under
# ~/.local/share/uv/python/...), and its bin/python is a symlink to it. The archive holds
# that base interpreter too (uv's managed Pythons are python-build-standalone builds,
# which run from any directory), and `unpack` points the environment at its new place.
#
#   scripts/indextts_env.sh build [--checkout DIR] [--venv DIR] [--no-checkout] OUT.tar.gz
#       on the connected machine: DIR is the index-tts checkout (default ./index-tts);
#       without --venv, runs `uv sync --all-extras` there if it has no .venv. The archive
#       holds python/ (the base interpreter), venv/ (the environment) and, unless
#       --no-checkout, index-tts/ (the checkout without .venv and .git: run one synthesis
#       first so that its text-normalizer grammars are compiled, docs/engines.md).
#   scripts/indextts_env.sh unpack OUT.tar.gz DEST
#       on the studio machine: extracts into DEST and relocates (below).
#   scripts/indextts_env.sh relocate DEST
#       rewrites DEST/venv for where it is now: pyvenv.cfg's home, the python symlinks,
#       the scripts' shebangs. Run it again after moving DEST.
#
# Then set HOST_PYTHON=DEST/venv/bin/python and INDEXTTS_DIR=DEST/index-tts, and run
# `dubstudio doctor`, which checks that the environment starts and imports IndexTTS.
set -euo pipefail

die() {
	echo "indextts_env: $*" >&2
	exit 1
}

usage() {
	sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}

# py_info PYTHON prints "base_prefix<TAB>prefix<TAB>X.Y" of an interpreter.
py_info() {
	"$1" -c 'import sys; print(sys.base_prefix, sys.prefix, "%d.%d" % sys.version_info[:2], sep="\t")'
}

build() {
	local checkout=./index-tts venv="" with_checkout=1 out=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--checkout) checkout=$2; shift 2 ;;
		--venv) venv=$2; shift 2 ;;
		--no-checkout) with_checkout=0; shift ;;
		-*) usage ;;
		*) out=$1; shift ;;
		esac
	done
	[ -n "$out" ] || usage
	if [ -z "$venv" ]; then
		[ -d "$checkout" ] || die "no index-tts checkout at $checkout (git clone https://github.com/index-tts/index-tts.git)"
		venv=$checkout/.venv
		if [ ! -x "$venv/bin/python" ]; then
			command -v uv >/dev/null || die "uv is not installed (https://docs.astral.sh/uv/)"
			(cd "$checkout" && uv sync --all-extras)
		fi
	fi
	[ -x "$venv/bin/python" ] || die "$venv/bin/python does not exist"
	venv=$(cd "$venv" && pwd -P)
	local info base prefix ver
	info=$(py_info "$venv/bin/python")
	IFS=$'\t' read -r base prefix ver <<<"$info"
	[ "$base" != "$prefix" ] || die "$venv/bin/python is not a virtual environment"
	case "$base" in
	*/uv/python/*) ;;
	*) echo "indextts_env: warning: the base interpreter $base is not uv's managed Python; it must run from another directory (python-build-standalone builds do)" >&2 ;;
	esac
	STAGE=$(mktemp -d) # global: the EXIT trap runs after build returns
	trap 'rm -rf "${STAGE:-}"' EXIT
	local stage=$STAGE
	cp -a "$base" "$stage/python"
	cp -a "$venv" "$stage/venv"
	if [ "$with_checkout" = 1 ] && [ -d "$checkout" ]; then
		mkdir "$stage/index-tts"
		tar -C "$checkout" --exclude=./.venv --exclude=./.git -cf - . | tar -C "$stage/index-tts" -xf -
	fi
	printf 'OLD_VENV=%s\nOLD_BASE=%s\nPYTHON_VERSION=%s\n' "$venv" "$base" "$ver" >"$stage/indextts-env.txt"
	tar -C "$stage" -czf "$out" .
	echo "indextts_env: wrote $out (Python $ver from $base, environment $venv)"
}

relocate() {
	[ $# -eq 1 ] || usage
	local dest
	dest=$(cd "$1" && pwd -P)
	[ -f "$dest/indextts-env.txt" ] || die "$dest/indextts-env.txt is missing: not an unpacked environment"
	local OLD_VENV="" OLD_BASE="" PYTHON_VERSION=""
	# shellcheck disable=SC1091
	. "$dest/indextts-env.txt"
	local venv=$dest/venv base=$dest/python ver=$PYTHON_VERSION
	[ -x "$base/bin/python$ver" ] || die "$base/bin/python$ver is missing"
	# The base interpreter, by its new path.
	local cfg=$venv/pyvenv.cfg tmp line
	tmp=$(mktemp)
	while IFS= read -r line || [ -n "$line" ]; do
		case "$line" in
		home\ =* | home=*) echo "home = $base/bin" ;;
		executable\ =* | base-executable\ =*) echo "${line%%=*}= $base/bin/python$ver" ;;
		base-prefix\ =* | base-exec-prefix\ =*) echo "${line%%=*}= $base" ;;
		*) echo "$line" ;;
		esac
	done <"$cfg" >"$tmp"
	mv "$tmp" "$cfg"
	# bin/python* are symlinks to the old base.
	local f
	for f in "$venv/bin/python" "$venv/bin/python3" "$venv/bin/python$ver"; do
		if [ -L "$f" ] || [ ! -e "$f" ]; then
			ln -sfn "$base/bin/python$ver" "$f"
		fi
	done
	# Console scripts start with #!OLD_VENV/bin/python and activate scripts name
	# OLD_VENV: the environment's own Python rewrites them (it starts now).
	"$venv/bin/python" - "$OLD_VENV" "$venv" "$venv/bin" <<'PY' || die "$venv/bin/python does not start after relocating"
import os, sys
old, new, bindir = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3]
for name in os.listdir(bindir):
    path = os.path.join(bindir, name)
    if os.path.islink(path) or not os.path.isfile(path):
        continue
    with open(path, "rb") as f:
        data = f.read()
    if old in data and b"\0" not in data[:1024]:
        with open(path, "wb") as f:
            f.write(data.replace(old, new))
PY
	printf 'OLD_VENV=%s\nOLD_BASE=%s\nPYTHON_VERSION=%s\n' "$venv" "$base" "$ver" >"$dest/indextts-env.txt"
	local info got_base got_prefix
	info=$(py_info "$venv/bin/python") || die "$venv/bin/python does not start after relocating"
	IFS=$'\t' read -r got_base got_prefix _ <<<"$info"
	[ "$got_prefix" = "$venv" ] || die "the environment runs as $got_prefix, want $venv"
	[ "$got_base" = "$base" ] || die "the environment's base is $got_base, want $base"
	echo "indextts_env: relocated to $dest"
	echo "HOST_PYTHON=$venv/bin/python"
	if [ -d "$dest/index-tts" ]; then
		echo "INDEXTTS_DIR=$dest/index-tts"
	fi
}

unpack() {
	[ $# -eq 2 ] || usage
	mkdir -p "$2"
	tar -C "$2" -xzf "$1"
	relocate "$2"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
build) build "$@" ;;
unpack) unpack "$@" ;;
relocate) relocate "$@" ;;
*) usage ;;
esac
