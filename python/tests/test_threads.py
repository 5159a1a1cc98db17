"""The engine releases the GIL, and Ctrl-C (a real SIGINT) stops a long call promptly with
KeyboardInterrupt, in a slow stream or inside the engine's passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import DEMO

SCRIPT = r"""
import sys, time
import pyarrow as pa, pyarrow.parquet as pq
import advcalc

table = pq.read_table(sys.argv[1])
if sys.argv[2] == "stream":
    # a producer that takes minutes: 50 ms per record batch
    def slow():
        for _ in range(10_000):
            time.sleep(0.05)
            yield from table.to_batches()
    data = pa.RecordBatchReader.from_batches(table.schema, slow())
else:
    # 300 copies of the demo (chunks share buffers): seconds of engine work
    data = pa.concat_tables([table] * 300)
print("started", flush=True)
start = time.monotonic()
try:
    advcalc.compute(data, estimator="gae")
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - start:.3f}", flush=True)
    # and the next call works: the stop request was cleared
    advcalc.compute(table, estimator="grpo")
    print("next call ok", flush=True)
    sys.exit(0)
print(f"finished {time.monotonic() - start:.3f}", flush=True)
sys.exit(3)
"""


@pytest.mark.parametrize("where", ["stream", "engine"])
def test_ctrl_c_interrupts_a_long_compute(where: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(DEMO), where],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout.readline() == "started\n"
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 0, f"exit {proc.returncode}: {out}{err}"
    assert out.startswith("interrupted") and "next call ok" in out, out
    assert took < 3.0, f"took {took:.2f} s to stop"


def test_the_gil_is_released_while_the_engine_works() -> None:
    table = pa.concat_tables([pq.read_table(DEMO)] * 40)
    done = threading.Event()

    def work() -> None:
        try:
            advcalc.compute(table, estimator="gae", threads=1)
        finally:
            done.set()

    worker = threading.Thread(target=work)
    ticks = 0
    worker.start()
    start = time.monotonic()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    elapsed = time.monotonic() - start
    worker.join()
    # with the GIL held for the whole call this thread could not tick at all
    assert elapsed > 0.05, "the call was too quick to tell"
    assert ticks > elapsed * 100, f"{ticks} ticks in {elapsed:.2f} s"
