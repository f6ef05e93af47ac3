#!/usr/bin/env bash
# Regenerates every figure of docs/BENCHMARKS.md: each benchmark's variants
# run interleaved (N rounds, one process per variant per round, the order
# rotated every round), then compared with the baseline of their own round.
#
#   internal/benchratio/all.sh            # everything (about 20 minutes on 2 busy cores)
#   internal/benchratio/all.sh CallTool   # one benchmark: CallTool RequestsPerCall DelayedProxy
#                                         # ForgottenSession SlowClose Keys IdleSweep MassClose Peers Hop
#
# N overrides the rounds of every benchmark (N=3 for a quick look); OUT is
# where the raw `go test -bench` output of each is kept (default
# /tmp/benchratio), next to the table printed here. Peers needs node and
# `npm ci` in bench/peers.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
OUT="${OUT:-/tmp/benchratio}"
mkdir -p "$OUT"
go build -o "$OUT/rounds" ./internal/benchratio/rounds
go build -o "$OUT/benchratio" ./internal/benchratio

# bench NAME ROUNDS BASELINE VARIANTS [rounds flags...]
bench() {
	local name=$1 n=${N:-$2} baseline=$3 variants=$4
	shift 4
	if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
		return
	fi
	echo "== $name: $n rounds of $variants; baseline ${baseline:-none}"
	# One benchmark that fails (a round too noisy to take a p99 from, say)
	# is reported and the others still run: the figures of a 20-minute run
	# are not thrown away for one of them. The script exits 1 at the end.
	if ! "$OUT/rounds" -n "$n" -bench "$name" -variants "$variants" "$@" >"$OUT/$name.txt"; then
		echo "== $name FAILED; its output: $OUT/$name.txt" >&2
		tail -n 5 "$OUT/$name.txt" >&2 || true
		failed+=("$name")
		echo
		return
	fi
	if ! "$OUT/benchratio" -baseline "$baseline" <"$OUT/$name.txt" | tee "$OUT/$name.ratio"; then
		echo "== $name: no ratio could be taken" >&2
		failed+=("$name")
	fi
	echo
}
ONLY="$*"
failed=()

grep -m1 '^model name' /proc/cpuinfo || true
echo "cores: $(nproc); $(go version); $(date -u +%FT%TZ); commit $(git rev-parse --short HEAD)"
echo

bench CallTool 9 raw-session pooled,raw-session,connect-per-call -pkg ./pool -benchtime 0.5s
bench RequestsPerCall 3 connect-per-call pooled,connect-per-call,connect-per-call-get -pkg ./pool -benchtime 0.5s
bench DelayedProxy 5 connect-per-call pooled,connect-per-call -pkg ./pool -benchtime 1s
bench ForgottenSession 5 "" pooled -pkg ./pool -benchtime 1s -timeout 5m
bench SlowClose 9 "" pooled -pkg ./pool -benchtime 1x -timeout 5m
bench Keys 5 k1 k1,k1000,k10000 -pkg ./pool -benchtime 1s
bench IdleSweep 3 "" k1000,k10000 -pkg ./pool -benchtime 1x
bench MassClose 3 "" k1000,k10000 -pkg ./pool -benchtime 1x
bench Peers 7 raw-session pooled,raw-session,mcp-go,ts-sdk -C bench/peers -pkg . -benchtime 0.5s
bench Hop 7 direct direct,studio,studio-dial -pkg ./internal/studio -benchtime 0.5s

if [ ${#failed[@]} -gt 0 ]; then
	echo "benchmarks that failed (their figures are missing above): ${failed[*]}" >&2
	exit 1
fi
