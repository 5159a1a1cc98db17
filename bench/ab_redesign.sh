#!/usr/bin/env bash
# A/B: two advcalc binaries (OLD, e.g. built at an earlier commit in a `git worktree`, and
# NEW), alternating, GRPO and the benchmark's full chain on the 8k-row dump that bench/run.py
# makes (it also writes full_chain.yaml). Appends "old|new grpo|chain wall_s maxrss_kb" lines
# to $OUT_DIR/ab_times.txt. Needs /usr/bin/time.
#   OLD=/path/to/old/advcalc bash bench/ab_redesign.sh
set -u
OLD=${OLD:?set OLD to the advcalc binary built at the earlier commit}
NEW=${NEW:-target/release/advcalc}
IN=${IN:-bench/data/dump_8192.parquet}
OUT=${OUT_DIR:-bench/data}
CHAIN=$OUT/full_chain.yaml
for i in 1 2 3 4 5 6 7; do
  for v in old new; do
    bin=$OLD; [ $v = new ] && bin=$NEW
    for job in grpo chain; do
      args="-e grpo"; [ $job = chain ] && args="--config $CHAIN"
      rm -f $OUT/ab_out_$v.parquet; sync
      /usr/bin/time -f "$v $job %e %M" $bin run $args --quiet -f $IN $OUT/ab_out_$v.parquet 2>>$OUT/ab_times.txt
    done
  done
done
