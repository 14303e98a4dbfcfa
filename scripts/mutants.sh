#!/usr/bin/env bash
# make mutants: runs the partition simulator once per planted bug of
# partition/sim/mutants.txt (build tag simmutant, LANEWAY_MUTANT=name) over
# what CI runs, and fails if any mutant survives: first the random seeds
# (TestSim, stopping at the first failing seed), then, if they all pass,
# the regression scripts (TestSimRegressions). Prints, per mutant, what
# caught it: the seed or the script, and the rule. MUTANTS="a b" runs only
# those; MUTANT_SEEDS=n changes the range.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${MUTANT_SEEDS:-10000}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go test -c -tags simmutant -o "$tmp/sim.test" ./partition/sim
names="${MUTANTS:-$(grep -v '^#' partition/sim/mutants.txt | awk 'NF {print $1}')}"

# run NAME TEST ARGS...: runs the test binary under mutant NAME; true when
# it passed (the mutant survived it).
run() {
	local name="$1"
	shift
	(cd partition/sim && LANEWAY_MUTANT="$name" "$tmp/sim.test" -test.count=1 -test.run "$@" >"$tmp/out" 2>&1)
}

# rule prints the first violation the last run reported.
rule() { grep -m1 -oE '(rule [0-9]+|panic)[^,(]{0,60}' "$tmp/out" || true; }

survivors=()
for name in $names; do
	start=$(date +%s)
	if ! run "$name" 'TestSim$' -seeds "$seeds" -max-failed 1; then
		seed="$(grep -m1 -oE 'seed [0-9]+ broke' "$tmp/out" | grep -oE '[0-9]+' || true)"
		printf '%-34s seed %-6s %3ds  %s\n' "$name" "${seed:-?}" $(($(date +%s) - start)) "$(rule)"
	elif ! run "$name" 'TestSimRegressions'; then
		script="$(grep -m1 -oE 'script [a-z0-9-]+, seed' "$tmp/out" | head -1 | cut -d' ' -f2 | tr -d , || true)"
		printf '%-34s script %s %3ds  %s\n' "$name" "${script:-?}" $(($(date +%s) - start)) "$(rule)"
	else
		survivors+=("$name")
		printf '%-34s SURVIVED %ds\n' "$name" $(($(date +%s) - start))
	fi
done
if ((${#survivors[@]} > 0)); then
	echo "mutants survived: ${survivors[*]}"
	exit 1
fi
echo "every mutant caught"
