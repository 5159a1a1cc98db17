"""Two advcalc binaries, byte for byte and for speed (issue #37: the crate split changes no
output and no speed).

    python bench/ab_outputs.py OLD_BIN NEW_BIN [--dumps DUMP.parquet ...] [--rounds N]

Outputs: every case of the verl corpus (run), the loss corpus (loss) and the cross-trainer
corpus (run), with their metrics, stderr and exit codes; `inspect --json`, `compare --json`
and `report` on the demo dump; and run (grpo, gae), loss and inspect on each benchmark dump
given. Every pair of files must be equal byte for byte (the footer names the writer, not the
binary's path). Speed: each benchmark command timed in alternating rounds (old, new, old,
new, ...), medians and the ratio new/old printed.
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(binary, args, cwd):
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True)


def corpus_cases():
    """(name, case dir, command, args) for every case of the three corpora."""
    cases = []
    for corpus, command in [
        ("verl/cases", "run"),
        ("verl/loss/cases", "loss"),
        ("trainers/cases", "run"),
    ]:
        for d in sorted((ROOT / "fixtures" / corpus).iterdir()):
            spec_path = d / "case.json"
            if not spec_path.is_file():
                continue
            spec = json.loads(spec_path.read_text())
            args = [a for a in spec.get("args", []) if isinstance(a, str)]
            cases.append((f"{corpus}/{d.name}", d, command, args, spec.get("metrics", False)))
    return cases


def compare_case(old, new, name, cwd, command, args, metrics, work):
    """The differences between the two binaries' outputs of one command."""
    outs = {}
    for label, binary in [("old", old), ("new", new)]:
        d = work / label / name.replace("/", "_")
        d.mkdir(parents=True)
        full = [command, *args, "--quiet", "input.parquet", str(d / "out.parquet")]
        if metrics:
            full += ["--metrics", str(d / "metrics.json")]
        p = run(binary, full, cwd)
        # the temporary directory's name differs between the two runs: normalise it
        err = p.stderr.replace(str(d).encode(), b"OUT")
        outs[label] = (p.returncode, err, d)
    problems = []
    (rc_o, err_o, d_o), (rc_n, err_n, d_n) = outs["old"], outs["new"]
    if rc_o != rc_n:
        problems.append(f"exit {rc_o} vs {rc_n}")
    if err_o != err_n:
        problems.append(f"stderr differs:\n  {err_o[:300]!r}\n  {err_n[:300]!r}")
    for f in ["out.parquet", "metrics.json"]:
        a, b = d_o / f, d_n / f
        if a.exists() != b.exists():
            problems.append(f"{f}: present {a.exists()} vs {b.exists()}")
        elif a.exists() and a.read_bytes() != b.read_bytes():
            problems.append(f"{f} differs")
    return problems


def compare_files(old, new, label, args_of, work, compare_stdout=False):
    """One command whose output file (or stdout) is compared; `args_of(out_path)`."""
    results = []
    for which, binary in [("old", old), ("new", new)]:
        out = work / f"{label}-{which}"
        p = run(binary, args_of(out), ROOT)
        results.append((p.returncode, p.stdout if compare_stdout else b"", out))
    (rc_o, so_o, f_o), (rc_n, so_n, f_n) = results
    problems = []
    if rc_o != rc_n:
        problems.append(f"exit {rc_o} vs {rc_n}")
    if so_o != so_n:
        problems.append("stdout differs")
    if f_o.exists() != f_n.exists():
        problems.append("output present in one only")
    elif f_o.exists() and f_o.read_bytes() != f_n.read_bytes():
        problems.append("output differs")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--dumps", nargs="*", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        cases = corpus_cases()
        for name, d, command, args, metrics in cases:
            problems = compare_case(a.old, a.new, name, d, command, args, metrics, work)
            if problems:
                failures += 1
                print(f"DIFF {name}: " + "; ".join(problems))
        print(f"corpora: {len(cases)} cases, {failures} differ")
        demo = str(ROOT / "fixtures/demo.parquet")
        singles = [
            ("inspect", lambda o: ["inspect", "--json", demo], True),
            ("compare", lambda o: ["compare", "--json", "-e", "grpo,rloo,drgrpo", demo], True),
            ("report", lambda o: ["report", "-q", demo, "-o", str(o)], False),
            ("estimators", lambda o: ["estimators", "--json"], True),
        ]
        for dump in a.dumps:
            stem = pathlib.Path(dump).stem
            singles += [
                (f"{stem}-grpo", lambda o, d=dump: ["run", "-q", "-e", "grpo", d, str(o) + ".parquet", "--metrics", str(o)], False),
                (f"{stem}-gae", lambda o, d=dump: ["run", "-q", "-e", "gae", d, str(o)], False),
                (f"{stem}-loss", lambda o, d=dump: ["loss", "-q", d, str(o)], False),
                (f"{stem}-inspect", lambda o, d=dump: ["inspect", "--json", d], True),
            ]
        for label, args_of, stdout in singles:
            problems = compare_files(a.old, a.new, label, args_of, work, stdout)
            if problems:
                failures += 1
                print(f"DIFF {label}: " + "; ".join(problems))
        print(f"other outputs: {len(singles)} commands compared")
        # speed: alternating rounds, outputs overwritten (-f)
        for dump in a.dumps:
            stem = pathlib.Path(dump).stem
            for label, args in [
                ("run -e grpo", ["run", "-q", "-f", "-e", "grpo", dump, str(work / "speed.parquet")]),
                ("run -e gae", ["run", "-q", "-f", "-e", "gae", dump, str(work / "speed.parquet")]),
                ("loss", ["loss", "-q", "-f", dump, str(work / "speed.parquet")]),
            ]:
                times = {"old": [], "new": []}
                for _ in range(a.rounds):
                    for which, binary in [("old", a.old), ("new", a.new)]:
                        t = time.perf_counter()
                        p = run(binary, args, ROOT)
                        times[which].append(time.perf_counter() - t)
                        if p.returncode != 0:
                            print(f"{which} {label} failed: {p.stderr[:300]!r}")
                o, n = statistics.median(times["old"]), statistics.median(times["new"])
                print(f"speed {stem} {label}: old {o:.2f} s, new {n:.2f} s, new/old {n / o:.3f} "
                      f"(rounds {a.rounds}; old {[round(x, 2) for x in times['old']]}, "
                      f"new {[round(x, 2) for x in times['new']]})")
    print("byte for byte: " + ("identical" if failures == 0 else f"{failures} differ"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
