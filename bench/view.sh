#!/usr/bin/env bash
# advcalc view at scale: seconds until the URL is printed (the overview is ready then), each
# row's request, peak RSS against advcalc inspect's on the same dump (docs/benchmarks.md).
#   bench/view.sh bench/data/dump_32768.parquet [more view arguments]
set -u
BIN=${BIN:-target/release/advcalc}
DUMP=$1; shift
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
start=$(date +%s.%N)
/usr/bin/time -f "%M" -o "$scratch/rss" "$BIN" view -q -e grpo "$@" "$DUMP" > "$scratch/url" &
pid=$!
while [ ! -s "$scratch/url" ]; do sleep 0.02; done
ready=$(date +%s.%N)
URL=$(head -1 "$scratch/url"); B=${URL%%/\?token=*}; T=${URL##*token=}
echo "ready (URL printed, overview built) after $(echo "$ready - $start" | bc) s"
curl -s -o /dev/null -w "overview %{time_total} s, %{size_download} B\n" "$B/api/overview?token=$T"
for r in 0 1 5000 12345 16384 32767; do
    curl -s -o /dev/null -w "row $r %{time_total} s, %{size_download} B\n" "$B/api/rows/$r?token=$T"
done
kill -INT "$(pgrep -P $pid)"; wait $pid
echo "view peak RSS $(tail -1 "$scratch/rss") KB"
/usr/bin/time -f "inspect peak RSS %M KB, %e s" "$BIN" inspect -q -e grpo "$@" "$DUMP" > /dev/null
