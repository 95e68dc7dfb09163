#!/usr/bin/env bash
# Mutation testing with gremlins (pinned, run from the Go module proxy; not a dependency of the
# module), over PKGS (default: convert webhook controller wrap), and a score per package.
#
#   hack/mutate.sh          (make mutate-changed) the files of PKGS changed since the merge-base
#                           of SINCE (default main) and the working tree, untracked ones included:
#                           on a branch, what it adds; on main, what is not committed yet. Minutes
#                           for a file or two.
#   hack/mutate.sh all      (make mutate-all) every line of PKGS, one package at a time. Hours on
#                           2 cores.
#
# `make mutate` is the sampler instead (hack/mutsample): a score for every package in minutes.
#
# Prints the mutants that lived and a score per package; exits 1 when one lived.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-changed}
GO=${GO:-go}
GREMLINS=${GREMLINS:-github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0}
read -r -a pkgs <<<"${PKGS:-convert webhook controller wrap}"
since=${SINCE:-main}
workers=${MUTATE_WORKERS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Each mutant is one `go test` of its package with -failfast; vet and DWARF are not needed for
# that, and skipping them makes each compile and link shorter.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-vet=off -ldflags=-w"
unleash=(run "$GREMLINS" unleash --workers "$workers" --test-cpu 1)

# gremlins' own --diff (v0.6.0) never matches when it runs on a package folder (it compares paths
# from the module root with paths from the folder), so the changed mode picks files itself: the
# files of each package changed since SINCE, untracked ones included, and excludes the rest.
changed_files() { # package -> its changed non-test .go files, one per line
	{
		git diff --name-only --merge-base "$since" -- "$1/*.go"
		git ls-files --others --exclude-standard -- "$1/*.go"
	} | grep -v '_test\.go$' | grep -E "^$1/[^/]+\.go$" | sort -u || true
}

for p in "${pkgs[@]}"; do
	exclude=()
	if [[ $mode == changed ]]; then
		changed=$(changed_files "$p")
		if [[ -z $changed ]]; then
			echo "== $p: no change since $(git merge-base "$since" HEAD | cut -c1-12) (SINCE=$since)"
			continue
		fi
		echo "== $p: $(echo "$changed" | xargs -n1 basename | xargs)"
		for f in "$p"/*.go; do
			[[ $f == *_test.go ]] && continue
			grep -qx "$f" <<<"$changed" || exclude+=("^$(basename "$f" | sed 's/\./\\./g')\$")
		done
	elif [[ $mode == all ]]; then
		echo "== $p"
	else
		echo "usage: $0 [changed|all]" >&2
		exit 2
	fi
	args=(--timeout-coefficient 10 -o "$out/$p.json")
	if ((${#exclude[@]})); then args+=(-E "$(IFS=,; echo "${exclude[*]}")"); fi
	"$GO" "${unleash[@]}" "${args[@]}" "./$p" | grep -Ev '^ *(KILLED|NOT COVERED|SKIPPED) ' || true
done
"$GO" run ./hack/mutation-score "$out"/*.json
