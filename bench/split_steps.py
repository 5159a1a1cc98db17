"""Split a benchmark dump into one file per step, as the verl hook writes them.

Each row group of the dump becomes one step: `OUT_DIR/step=N.parquet` (N from 1) holds its
rows with a `step` column, and `--whole` gets the same rows as one file (the concatenation,
with the same `step` column), so that a dataset run and a single-file run compute the same
numbers (docs/benchmarks.md, "Datasets").

    python bench/split_steps.py bench/data/dump.parquet bench/data/steps --whole bench/data/whole.parquet
"""

import argparse
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump")
    ap.add_argument("out_dir")
    ap.add_argument("--whole", help="also write the concatenation here")
    args = ap.parse_args()
    src = pq.ParquetFile(args.dump)
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    for rg in range(src.num_row_groups):
        t = src.read_row_group(rg)
        t = t.append_column("step", pa.array([rg + 1] * t.num_rows, pa.int64()))
        pq.write_table(t, out / f"step={rg + 1}.parquet", compression="zstd")
        tables.append(t)
    if args.whole:
        whole = pa.concat_tables(tables)
        pq.write_table(whole, args.whole, compression="zstd", row_group_size=tables[0].num_rows)


if __name__ == "__main__":
    main()
