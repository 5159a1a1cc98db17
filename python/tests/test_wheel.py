"""The wheel a training image installs: into a fresh virtual environment, with no Rust
toolchain on PATH, then `compute`, the verl hook and `advcalc.ray.run` from it.

`ADVCALC_WHEEL` names the wheel: scripts/test builds it with `scripts/wheel --profile dev`
(the release command with cargo's dev profile) and sets it. pip installs the wheel's
dependencies with the versions of python/requirements-test.txt (from pip's cache after
the first time) and refuses anything that would build from source.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import DEMO, REPO, same_columns

WHEEL = os.environ.get("ADVCALC_WHEEL")

# What runs inside the fresh environment (its cwd is a scratch directory, never the clone).
SCRIPT = r"""
import json, os, shutil, sys
from pathlib import Path

assert shutil.which("cargo") is None and shutil.which("rustc") is None, os.environ["PATH"]
import numpy as np
import pyarrow.parquet as pq
import advcalc, advcalc.verl, advcalc.ray

demo, work = Path(sys.argv[1]), Path(sys.argv[2])
assert Path(advcalc.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), advcalc.__file__

# compute, from the wheel
pq.write_table(advcalc.compute(demo, estimator="grpo"), work / "compute.parquet")

# the verl hook: a batch of two steps, two prompts of three responses each, as write_step gets it
dumps = work / "dumps"
rng = np.random.default_rng(7)
for step in (1, 2):
    B, T = 6, 5
    lengths = np.array([5, 3, 4, 1, 5, 2])
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.int64)
    scores = np.zeros((B, T), dtype=np.float32)
    scores[np.arange(B), lengths - 1] = rng.integers(0, 2, B)
    batch = {
        "uid": np.array([f"s{step}p0"] * 3 + [f"s{step}p1"] * 3, dtype=object),
        "response_mask": mask,
        "rm_scores": scores,
        "old_log_probs": -np.abs(rng.normal(size=(B, T))).astype(np.float32),
    }
    advcalc.verl.write_step(batch, dumps, step, response_lengths=lengths)
steps = [p.name for _, p in advcalc.verl.list_steps(dumps)]

# advcalc.ray.run on the hook's files, on a local Ray whose workers run this environment
import ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
summary = advcalc.ray.run(dumps, work / "ray-out", estimator="grpo")
ray.shutdown()
print(json.dumps({"version": advcalc.__version__, "steps": steps, "rows": summary["rows"],
                  "per_step": summary["per_step"], "outputs": summary["outputs"]}))
"""


def _without_rust(path: str) -> str:
    """PATH less every directory that holds a Rust toolchain (cargo, rustc, rustup)."""
    tools = ("cargo", "rustc", "rustup")
    keep = [d for d in path.split(os.pathsep) if d and not any(shutil.which(t, path=d) for t in tools)]
    return os.pathsep.join(keep)


def _constraints(tmp_path: Path) -> Path:
    """python/requirements-test.txt as a pip constraints file (no extras allowed there)."""
    lines = []
    for line in (REPO / "python" / "requirements-test.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            lines.append(re.sub(r"\[.*?\]", "", line))
    out = tmp_path / "constraints.txt"
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.skipif(not WHEEL, reason="ADVCALC_WHEEL is not set: scripts/test builds the wheel")
def test_the_wheel_installs_and_runs_without_rust(tmp_path: Path) -> None:
    wheel = Path(WHEEL)
    assert re.fullmatch(r"advcalc_rl-[\w.]+-cp39-abi3-manylinux_2_28_x86_64\.whl", wheel.name)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith(("CARGO", "RUST"))
    }
    venv = tmp_path / "venv"
    # the base interpreter, not .venv's: a fresh environment sees nothing .venv holds
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), _without_rust(env.get("PATH", ""))])
    python = str(venv / "bin" / "python")
    check = subprocess.run(
        [python, "-c", "import shutil; print(shutil.which('cargo'), shutil.which('rustc'))"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert check.stdout.split() == ["None", "None"]

    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--only-binary", ":all:", "-c", str(_constraints(tmp_path)), f"{wheel}[ray,verl]"],
        env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [python, "-c", SCRIPT, str(DEMO), str(work)],
        env=env, capture_output=True, text=True, timeout=600, cwd=work,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["version"] == advcalc.__version__
    assert found["steps"] == ["step=1.parquet", "step=2.parquet"]
    assert found["rows"] == 12 and found["per_step"] is True

    # the same numbers as this environment's package
    same_columns(pq.read_table(work / "compute.parquet"), advcalc.compute(DEMO, estimator="grpo"))
    for step in (1, 2):
        name = f"step={step}.parquet"
        want = advcalc.compute(work / "dumps" / name, estimator="grpo")
        same_columns(pq.read_table(work / "ray-out" / name), want)

    # the wheel's `advcalc` command: the CLI's own command line, without Rust, on a V1 dump
    # verl's own writer made; the same output as the Rust binary's
    cli = str(venv / "bin" / "advcalc")
    case = REPO / "fixtures" / "verl" / "jsonl_v1" / "prompt_drawn_twice"
    binary = os.environ.get("ADVCALC_BIN", str(REPO / "target" / "debug" / "advcalc"))
    for args in (["inspect", "--json", "."], ["inspect", "-e", "grpo", "."]):
        ours = subprocess.run([cli, *args], env=env, capture_output=True, text=True, cwd=case, timeout=120)
        theirs = subprocess.run([binary, *args], capture_output=True, text=True, cwd=case, timeout=120)
        assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
        assert ours.stdout == theirs.stdout and ours.stderr == theirs.stderr
    assert "grouped by the uid part" in ours.stderr or "grouped by the uid part" in ours.stdout
    run = subprocess.run([cli, "run", "-q", "-e", "grpo", ".", str(work / "v1.parquet")],
                         env=env, capture_output=True, text=True, cwd=case, timeout=120)
    assert run.returncode == 0, run.stderr
    expected = json.loads((case / "expected.json").read_text())["runs"][0]
    got = pq.read_table(work / "v1.parquet").column("advantage").to_pylist()
    assert got == pytest.approx(expected["advantages"], abs=2e-5, rel=2e-4)
    # usage errors and exit codes as the binary's; python -m advcalc is the same command
    bad = subprocess.run([python, "-m", "advcalc", "run", "-e", "gpro", ".", "x.parquet"],
                         env=env, capture_output=True, text=True, cwd=case, timeout=120)
    assert bad.returncode == 2 and "did you mean `grpo`?" in bad.stderr, bad.stderr
    version = subprocess.run([cli, "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"advcalc {advcalc.__version__}"
