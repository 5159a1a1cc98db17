#!/usr/bin/env python3
"""advcalc from and to object storage against the server's own floor (issue 28, "Speed").

    cargo build --release --features cloud
    <venv>/bin/python bench/object_bench.py --moto <moto-venv>/bin/moto_server [--repeats 5]

Starts ``moto_server`` (moto 5.2.5, the tests' S3 server) on a free port of 127.0.0.1, puts
the benchmark dumps (``bench/make_dump.py``, 2048 and 8192 rows by default, made in
``--data`` when missing) into a bucket, then times, round robin in the same run, each as a
separate process (``bench/run.py``'s ``measure``: whole-process wall time, peak RSS, CPU):

* **floor**: pyarrow reads IN through ``pyarrow.fs.FileSystem.from_uri`` (as Ray Data
  resolves paths) and writes an OUT of the same size through the same server: IN plus
  three list<float32> columns, as ``bench/pyarrow_floor.py`` writes locally (zstd, row
  groups of 1024, only ``uid`` dictionary-encoded);
* **advcalc**: ``advcalc run -q -f -e grpo s3://…/in.parquet s3://…/out.parquet``.

The ratio advcalc / floor of the median wall times is the issue's target (<= 1.5). moto's
request log gives each command's requests by method (advcalc's: the HEAD of IN, the footer's
suffix GET, one GET per decoded or copied column chunk, the HEAD refusing an existing OUT
unless ``-f``, the PUT). ``--local`` also times both on local files, for the server's share.
The server is stopped (by its PID) at the end, also on an error. Prints a Markdown report and
writes it to ``--report`` (default ``bench/results-object.md``).

Run with ``--floor IN OUT`` this script is the floor itself (what the driver starts).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

BUCKET = "advcalc-bench"
# moto does not check signatures, but refuses anonymous requests to what signed ones wrote
AUTHORIZATION = ("AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, "
                 "SignedHeaders=host, Signature=0")


def floor(src: str, dst: str) -> None:
    """Read src and write dst (local paths or URIs) as bench/pyarrow_floor.py does."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from pyarrow_floor import with_output_columns

    fs, path = pafs.FileSystem.from_uri(src if "://" in src else os.path.abspath(src))
    table = with_output_columns(pq.read_table(path, filesystem=fs))
    fs, path = pafs.FileSystem.from_uri(dst if "://" in dst else os.path.abspath(dst))
    pq.write_table(table, path, filesystem=fs, row_group_size=1024, compression="zstd",
                   use_dictionary=["uid"])


class Moto:
    """moto_server on a free port of 127.0.0.1, its request log in a temporary file."""

    def __init__(self, exe: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log")
        self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit("moto_server did not start")
                time.sleep(0.1)
        self.request("PUT", f"/{BUCKET}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def request(self, method, path, body=b""):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body or None,
                                     method=method, headers={"Authorization": AUTHORIZATION})
        with urllib.request.urlopen(req) as r:
            return r.read()

    def env(self):
        return {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }

    def log_size(self):
        return os.path.getsize(self.log.name)

    def requests_since(self, offset):
        """Requests logged after byte `offset` of the log, by method."""
        with open(self.log.name, "rb") as f:
            f.seek(offset)
            # moto's log colours some lines
            text = re.sub(r"\x1b\[[0-9;]*m", "", f.read().decode(errors="replace"))
        counts = {}
        for method in re.findall(r'"([A-Z]+) /\S* HTTP/1\.[01]"', text):
            counts[method] = counts.get(method, 0) + 1
        return counts

    def size(self, key):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/{BUCKET}/{key}", method="HEAD",
                                     headers={"Authorization": AUTHORIZATION})
        with urllib.request.urlopen(req) as r:
            return int(r.headers["Content-Length"])


def show_counts(counts):
    return ", ".join(f"{n} {m}" for m, n in sorted(counts.items())) or "none"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--floor", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--moto", default=os.environ.get("ADVCALC_MOTO"),
                    help="the moto_server executable (default $ADVCALC_MOTO)")
    ap.add_argument("--advcalc", default=str(ROOT / "target/release/advcalc"),
                    help="advcalc built with --features cloud (default target/release/advcalc)")
    ap.add_argument("--rows", default="2048,8192", help="the dumps' row counts (default 2048,8192)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default=str(BENCH / "data"))
    ap.add_argument("--report", default=str(BENCH / "results-object.md"))
    ap.add_argument("--local", action="store_true", help="also time both on local files")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    if args.floor:
        floor(*args.floor)
        return 0
    if not args.moto:
        ap.error("--moto (or ADVCALC_MOTO) is required")
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    from run import ensure_dump, machine_description, measure, rel

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    dumps = [ensure_dump(sys.executable, int(n), data) for n in args.rows.split(",")]
    server = Moto(args.moto)
    lines = []
    try:
        os.environ.update(server.env())
        fs, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}/")
        for d in dumps:
            pafs.copy_files(str(d.resolve()), f"{BUCKET}/{d.name}",
                            destination_filesystem=fs)
        commands = {}
        for d in dumps:
            src = f"s3://{BUCKET}/{d.name}"
            commands[(d, "floor")] = (
                [sys.executable, str(Path(__file__).resolve()), "--floor", src,
                 f"s3://{BUCKET}/floor-{d.name}"], f"floor-{d.name}")
            commands[(d, "advcalc")] = (
                [args.advcalc, "run", "-q", "-f", "-e", "grpo", src,
                 f"s3://{BUCKET}/advcalc-{d.name}"], f"advcalc-{d.name}")
            if args.local:
                local = Path(tempfile.mkdtemp(prefix="object-bench-"))
                commands[(d, "floor, local")] = (
                    [sys.executable, str(Path(__file__).resolve()), "--floor", str(d),
                     str(local / "floor.parquet")], None)
                commands[(d, "advcalc, local")] = (
                    [args.advcalc, "run", "-q", "-f", "-e", "grpo", str(d),
                     str(local / "advcalc.parquet")], None)
        results = {k: {"wall": [], "rss": [], "cpu": [], "other": [], "requests": None}
                   for k in commands}
        keys = list(commands)
        for r in range(args.repeats):
            order = keys if r % 2 == 0 else keys[::-1]
            for k in order:
                argv, _ = commands[k]
                at = server.log_size()
                wall, rss, cpu, other, rc, err = measure(argv, {}, args.timeout)
                if rc != 0:
                    raise SystemExit(f"{' '.join(argv)} failed ({rc}):\n{err}")
                res = results[k]
                res["wall"].append(wall)
                res["rss"].append(rss)
                res["cpu"].append(cpu)
                res["other"].append(other or 0.0)
                if res["requests"] is None:
                    res["requests"] = server.requests_since(at)
                print(f"round {r + 1}: {k[0].name} {k[1]}: {wall:.2f} s", flush=True)

        med = lambda k, m: statistics.median(results[k][m])  # noqa: E731
        lines.append("| dump | IN | command | OUT | median wall | min wall | CPU | peak RSS "
                     "| requests (first run) |")
        lines.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for (d, name), (argv, out_key) in commands.items():
            meta = pq.ParquetFile(d).metadata
            out = f"{server.size(out_key) / 2**20:.1f} MiB" if out_key else ""
            lines.append(
                f"| {d.name} ({meta.num_rows} rows, {meta.num_row_groups} row groups, "
                f"{meta.num_columns} columns) | {d.stat().st_size / 2**20:.1f} MiB | {name} | "
                f"{out} | {med((d, name), 'wall'):.2f} s | {min(results[(d, name)]['wall']):.2f} s | "
                f"{med((d, name), 'cpu'):.2f} s | {med((d, name), 'rss') / 1024:.0f} MiB | "
                f"{show_counts(results[(d, name)]['requests']) if out_key else ''} |")
        lines.append("")
        lines.append("| dump | advcalc / floor (median wall) | target |")
        lines.append("| --- | ---: | --- |")
        for d in dumps:
            ratio = med((d, "advcalc"), "wall") / med((d, "floor"), "wall")
            verdict = "PASS" if ratio <= 1.5 else "FAIL"
            lines.append(f"| {d.name} | **{ratio:.2f}** | <= 1.5: {verdict} |")
            if args.local:
                local = med((d, "advcalc, local"), "wall") / med((d, "floor, local"), "wall")
                lines.append(f"| {d.name}, local files (for comparison) | {local:.2f} | |")
        other = max(max(r["other"]) for r in results.values())
        lines.append("")
        lines.append(f"{args.repeats} runs of each, round robin; machine: {machine_description()}; "
                     f"other processes' load during the runs: up to {other:.2f} cores.")
        lines.append(f"advcalc: `{rel(args.advcalc)}`; dumps in `{rel(data)}`.")
    finally:
        server.stop()
    report = "\n".join(lines) + "\n"
    print()
    print(report)
    Path(args.report).write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
