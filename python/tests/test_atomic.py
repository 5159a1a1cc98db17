"""One atomic-write scheme for the CLI, the verl hook and the Ray runner: the pure-Python
twin (advcalc._atomic) names its temporaries as src/io/atomic.rs does, and each side removes
the other's leftovers of dead processes of this host, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from advcalc import _atomic

pytestmark = pytest.mark.skipif(
    not (os.path.exists("/proc/sys/kernel/random/boot_id") and os.path.exists("/proc/self/ns/pid")),
    reason="needs Linux /proc (a boot id and a PID namespace)",
)

PYTHON_SRC = Path(__file__).resolve().parents[1]
# above any pid_max: a dead process (as the Rust test)
DEAD = 2**31 - 1


def _native():
    return pytest.importorskip("advcalc._native")


def expected_prefix(pid: int) -> str:
    """`.advcalc-HOST-KEY-PID-` derived here from /proc, apart from both implementations."""
    host = Path("/proc/sys/kernel/hostname").read_text().strip()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    ns = os.readlink("/proc/self/ns/pid")
    h = 14695981039346656037  # FNV-1a 64: offset basis, prime 1099511628211
    for byte in f"{host}\0{boot}\0{ns}".encode():
        h = ((h ^ byte) * 1099511628211) % 2**64
    shown = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in host)[:64]
    return f".advcalc-{shown or 'host'}-{h:016x}-{pid}-"


def test_the_prefix_is_the_clis() -> None:
    for pid in (DEAD, os.getpid(), 1):
        want = expected_prefix(pid)
        assert _atomic.temp_prefix_for(pid) == want
        assert _native().temp_prefix_for(pid) == want
    assert _atomic.temp_prefix() == expected_prefix(os.getpid())
    assert "nokey" not in _atomic.temp_prefix()


def _leftovers(prefix_for) -> List[Tuple[str, bool]]:
    """Temporary names and whether a stale-temporary sweep keeps them."""
    host, key = _atomic.host_key()
    assert key is not None and key != "ffffffffffffffff"
    live = os.getppid()
    return [
        (f"{prefix_for(DEAD)}x1a2b3.parquet.tmp", False),
        (f"{prefix_for(DEAD)}x1a2b4.arrow.tmp", False),
        # the Ray runner's tagged name: a dead process of this host, so removed too
        (f"{prefix_for(DEAD)}ray.0123456789ab.Xy12Z9.parquet.tmp", False),
        (f"{prefix_for(live)}x1a2b5.parquet.tmp", True),
        (f"{prefix_for(os.getpid())}x1a2b6.parquet.tmp", True),
        # another host, a dead-looking pid
        (f".advcalc-elsewhere-0123456789abcdef-{DEAD}-x1a2b7.parquet.tmp", True),
        # this host's name, another boot or container
        (f".advcalc-{host}-ffffffffffffffff-{DEAD}-x1a2b8.parquet.tmp", True),
        # older namings: the Ray runner's and the verl hook's, and not a temporary at all
        (f".advcalc-ray-0123456789ab-{DEAD}-part0.parquet.tmp", True),
        (".step=3.parquet.tmp-abc123", True),
        (f"{prefix_for(DEAD)}x1a2b9.parquet", True),
    ]


def _sweep(directory: Path, names: List[Tuple[str, bool]], sweep) -> None:
    for name, _ in names:
        (directory / name).write_bytes(b"x")
    sweep(str(directory))
    left = {p.name for p in directory.iterdir()}
    assert left == {name for name, kept in names if kept}


def test_the_cli_removes_the_python_writers_dead_temporaries(tmp_path: Path) -> None:
    # names as advcalc._atomic makes them, swept by the CLI's Rust code
    names = _leftovers(_atomic.temp_prefix_for)
    real = _atomic.create_temporary(tmp_path, ".parquet.tmp")
    assert real.name.startswith(expected_prefix(os.getpid())) and real.name.endswith(".parquet.tmp")
    _sweep(tmp_path, names + [(real.name, True)], _native().remove_stale_temporaries)


def test_the_python_writers_remove_the_clis_dead_temporaries(tmp_path: Path) -> None:
    # names as the CLI's Rust code makes them, swept by advcalc._atomic
    _sweep(tmp_path, _leftovers(_native().temp_prefix_for), _atomic.remove_stale_temporaries)


def test_the_same_sweep_from_an_independent_prefix(tmp_path: Path) -> None:
    native = _native()
    for i, sweep in enumerate((native.remove_stale_temporaries, _atomic.remove_stale_temporaries)):
        directory = tmp_path / str(i)
        directory.mkdir()
        _sweep(directory, _leftovers(expected_prefix), sweep)


def test_creating_a_temporary_sweeps_first(tmp_path: Path) -> None:
    dead = tmp_path / f"{_atomic.temp_prefix_for(DEAD)}abcdef.parquet.tmp"
    dead.write_bytes(b"x")
    tmp = _atomic.create_temporary(tmp_path, ".arrow.tmp")
    assert not dead.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [tmp.name]
    umask = os.umask(0)
    os.umask(umask)
    assert tmp.stat().st_mode & 0o777 == 0o666 & ~umask


def test_tagged_temporaries_of_any_host(tmp_path: Path) -> None:
    tag = "ray.0123456789ab."
    live = _atomic.temp_prefix()
    names = [
        (f"{live}{tag}Ab12Cd.parquet.tmp", False),
        (f".advcalc-elsewhere-0123456789abcdef-{DEAD}-{tag}Ab12Cd.arrow.tmp", False),
        (f".advcalc-other-host-nokey-12-{tag}Ab12Cd.parquet.tmp", False),
        (f"{live}ray.ba9876543210.Ab12Cd.parquet.tmp", True),
        (f"{live}Ab12Cd.parquet.tmp", True),
        (f"{live}{tag}Ab12Cd.parquet", True),
    ]
    _sweep(tmp_path, names, lambda d: _atomic.remove_tagged_temporaries(d, tag))


def test_write_atomic_names_syncs_and_cleans_up(tmp_path: Path) -> None:
    seen: List[str] = []
    table = pa.table({"x": [1, 2, 3]})

    def write(tmp: Path) -> None:
        seen.append(tmp.name)
        pq.write_table(table, tmp)

    out = _atomic.write_atomic(tmp_path / "a.parquet", write, tag="t.")
    assert out == tmp_path / "a.parquet" and pq.read_table(out).equals(table)
    assert seen[0].startswith(expected_prefix(os.getpid()) + "t.") and seen[0].endswith(".parquet.tmp")
    _atomic.write_atomic(tmp_path / "a.arrow", lambda tmp: seen.append(tmp.name))
    assert seen[1].startswith(expected_prefix(os.getpid())) and seen[1].endswith(".arrow.tmp")

    def dying(tmp: Path) -> None:
        tmp.write_bytes(b"PAR1 half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _atomic.write_atomic(tmp_path / "a.parquet", dying)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arrow", "a.parquet"]
    assert pq.read_table(out).equals(table)


def test_the_verl_hook_writes_the_clis_names_without_the_native_module(tmp_path: Path) -> None:
    # only the package's Python files on PYTHONPATH, the native module made unimportable: a
    # writer killed mid-write (SIGKILL) leaves a temporary named as the CLI names its own
    code = f"""
import os, signal, sys
sys.modules["advcalc._native"] = None  # importing it raises ImportError
import numpy as np
import advcalc.verl as hook
assert hook.__file__.startswith({str(PYTHON_SRC)!r}), hook.__file__
data = {{"uid": np.array(["a", "a"], dtype=object), "response_mask": np.array([[1, 1], [1, 0]]),
        "token_level_scores": np.zeros((2, 2))}}
hook.write_step(data, {str(tmp_path)!r}, step=1)
assert "torch" not in sys.modules, "torch imported"
def killed(table, sink, **kwargs):
    sink.write(b"PAR1 half")
    sink.flush()
    os.kill(os.getpid(), signal.SIGKILL)
hook.pq.write_table = killed
print(os.getpid(), flush=True)
hook.write_step(data, {str(tmp_path)!r}, step=2)
"""
    env = {**os.environ, "PYTHONPATH": str(PYTHON_SRC)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == -9, run.stderr
    pid = int(run.stdout.split()[0])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and names[1] == "step=1.parquet", names
    assert names[0].startswith(expected_prefix(pid)) and names[0].endswith(".parquet.tmp"), names
    # the CLI's sweep recognises it (its writer is dead); so does the next hook write
    _native().remove_stale_temporaries(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step=1.parquet"]


def test_the_ray_runners_end_of_run_sweep(tmp_path: Path) -> None:
    # the two-pass path's sweep when a run ends: its own temporaries from any node (a dead
    # node's are under another host's key), this host's dead processes'; not another run's
    import advcalc.ray as runner

    run_id = "0123456789ab"
    tag = runner._run_tag(run_id)
    _native()  # advcalc.ray needs the native module
    here = _atomic.temp_prefix()
    names = [
        (f".advcalc-node-2-0123456789abcdef-{DEAD}-{tag}Ab12Cd.parquet.tmp", False),
        (f"{here}{tag}Ab12Cd.arrow.tmp", False),
        (f"{_atomic.temp_prefix_for(DEAD)}Ab12Cd.parquet.tmp", False),
        (f".advcalc-node-2-0123456789abcdef-{DEAD}-{runner._run_tag('ba9876543210')}Ab12Cd.parquet.tmp", True),
        (f".advcalc-node-2-0123456789abcdef-{DEAD}-Ab12Cd.parquet.tmp", True),
        (f"{here}Ab12Cd.parquet.tmp", True),
    ]
    units = [runner._Unit("a", "part0.parquet", 1)]
    _sweep(tmp_path, names, lambda d: runner._remove_temporaries(Path(d), units, run_id))
