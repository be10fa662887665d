"""Big files: seconds and peak RSS of `gleambrctl index` on one huge file, and time to exit
after Ctrl-C.

    .venv/bin/python bench/big_files.py [--cases many_functions,big_constant,big_function]
        [--ctl PATH/TO/gleambrctl] [--timeout 180] [--json out.json]

Cases, each a package with one generated `.gleam` file, indexed with --max-file-size 20MB
by the CLI in a subprocess (so `--ctl` can point at another checkout's venv to compare):

  many_functions  10 MB of small documented functions
  big_constant    one 4.7 MB constant (a list of tuples over many lines)
  big_function    one 10 MB function (a long run of `let` statements)

Per case: a full run (seconds, or "timeout" after --timeout, peak RSS of the process,
sampled with psutil every 50 ms), then a second fresh run that gets SIGINT once the
process has used --cpu-before-sigint CPU seconds (work is then under way, in any version,
with no help from the process); time to exit, exit code and stderr are reported.

Measured 2026-12-01 on the shared 2-core machine (load average ~22), main 7ff0d7b against
branch interrupts, --timeout 150 (big_constant also with 420):

  case            peak RSS before -> after      exit after SIGINT before -> after
  many_functions  1040-1580 MB* -> 1037 MB*     53 s -> 1.05 s
  big_constant    1542 MB  ->  865 MB           > 55 s (killed) -> 0.94 s
  big_function    2561-2807 MB* -> 1013 MB*     > 28 s (killed) -> 1.07 s
  (* at the 150 s timeout, still running.) big_constant to the end: before 1 chunk of
  4.7 MB, 20.9 CPU s; after 295 parts of <= 16,000 characters, 36.6 CPU s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

MB = 1_000_000


def _fill(head: str, piece: Callable[[int], str], size: int, tail: Callable[[int], str]) -> str:
    """`head`, then piece(0), piece(1), ... until `size` bytes, then tail(pieces written)."""
    out = [head]
    total = len(head)
    i = 0
    while total < size:
        text = piece(i)
        out.append(text)
        total += len(text)
        i += 1
    out.append(tail(i))
    return "".join(out)


def _function(i: int) -> str:
    return (
        f"\n/// Scales {i} by a few steps and names the result.\n"
        f"pub fn step_{i}(x: Int, label: String) -> String {{\n"
        f"  let a = x + {i}\n"
        f"  let b = a * {i % 7 + 2}\n"
        f"  let c = case b > {i % 100} {{\n"
        f"    True -> b - {i % 13}\n"
        f"    False -> a + {i % 11}\n"
        f"  }}\n"
        f'  let name = label <> "_{i}"\n'
        f'  name <> ":" <> int.to_string(c)\n'
        f"}}\n"
    )


def many_functions(size: int = 10 * MB) -> str:
    """Documented functions of about 300 bytes each, until the file holds `size` bytes."""
    head = "//// A generated module with many small functions.\n\nimport gleam/int\n"
    return _fill(head, _function, size, lambda _: "")


def big_constant(size: int = 4_700_000) -> str:
    """One constant: a list of tuples, one per line, until it holds `size` bytes."""
    return _fill(
        "pub const table = [\n",
        lambda i: f'  #("key_{i}", {i}, "value number {i} of the generated table"),\n',
        size,
        lambda _: "]\n",
    )


def big_function(size: int = 10 * MB) -> str:
    """One function: a long run of `let` statements, until it holds `size` bytes."""
    return _fill(
        "pub fn huge(x: Int) -> Int {\n  let v0 = x\n",
        lambda i: f"  let v{i + 1} = v{i} + {(i + 1) % 97}\n",
        size,
        lambda n: f"  v{n}\n}}\n",
    )


CASES = {
    "many_functions": many_functions,
    "big_constant": big_constant,
    "big_function": big_function,
}


def write_package(root: Path, module: str, source: str) -> Path:
    """A package holding `src/<module>.gleam`; returns its root."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "gleam.toml").write_text(f'name = "{root.name}"\nversion = "1.0.0"\n')
    (root / "src" / f"{module}.gleam").write_text(source, encoding="utf-8")
    return root


def _watch(proc: subprocess.Popen[str], until: float, sigint_after_cpu: float | None) -> dict:
    """Sample the process until it exits or `until`; SIGINT once it used that much CPU."""
    ps = psutil.Process(proc.pid)
    peak = 0
    cpu = 0.0
    sent: float | None = None
    while proc.poll() is None and time.monotonic() < until:
        try:
            peak = max(peak, ps.memory_info().rss)
            cpu = sum(ps.cpu_times()[:2])
        except psutil.Error:
            break
        if sigint_after_cpu is not None and sent is None and cpu >= sigint_after_cpu:
            proc.send_signal(signal.SIGINT)
            sent = time.monotonic()
        time.sleep(0.05)
    # CPU seconds say more than wall seconds on a shared machine (the last sample's).
    return {"peak_rss_mb": round(peak / MB), "cpu_s": round(cpu, 1), "sigint_at": sent}


def run_case(ctl: str, root: Path, timeout: float, sigint_after_cpu: float | None) -> dict:
    shutil.rmtree(root / ".gbr", ignore_errors=True)
    started = time.monotonic()
    proc = subprocess.Popen(
        [ctl, "index", str(root), "--max-file-size", "20MB", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GBR_HOME": str(root.parent / "gbr-home")},
    )
    seen = _watch(proc, started + timeout, sigint_after_cpu)
    result: dict[str, Any] = {"peak_rss_mb": seen["peak_rss_mb"], "cpu_s": seen["cpu_s"]}
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        result["status"] = "timeout"
        result["seconds"] = round(time.monotonic() - started, 1)
        if seen["sigint_at"] is not None:
            result["exit_after_sigint_s"] = f"> {time.monotonic() - seen['sigint_at']:.0f}"
        return result
    ended = time.monotonic()
    stdout, stderr = proc.communicate()
    result["exit_code"] = proc.returncode
    if seen["sigint_at"] is not None:
        result["status"] = "interrupted"
        result["exit_after_sigint_s"] = round(ended - seen["sigint_at"], 2)
        result["stderr"] = stderr.strip()[-300:]
    else:
        result["status"] = "finished" if proc.returncode == 0 else "failed"
        result["seconds"] = round(ended - started, 1)
        if proc.returncode == 0:
            summary = json.loads(stdout)
            result["chunks"] = summary["chunks"]
            result["dropped"] = summary["files_dropped"]
        else:
            result["stderr"] = stderr.strip()[-300:]
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    p.add_argument(
        "--ctl",
        default=str(Path(sys.executable).parent / "gleambrctl"),
        help="the gleambrctl to measure (default: this venv's)",
    )
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per full run")
    p.add_argument(
        "--cpu-before-sigint",
        type=float,
        default=4.0,
        help="CPU seconds the process has used when SIGINT is sent",
    )
    p.add_argument("--skip-sigint", action="store_true", help="only the full runs")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every file size")
    p.add_argument("--json", metavar="FILE", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    results: dict[str, Any] = {"ctl": args.ctl, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="gbr-big-") as tmp:
        for name in args.cases.split(","):
            make = CASES[name]
            source = make(int(make.__defaults__[0] * args.scale))  # type: ignore[index]
            root = write_package(Path(tmp) / name, name, source)
            case: dict[str, Any] = {"bytes": len(source.encode())}
            case["full"] = run_case(args.ctl, root, args.timeout, None)
            if not args.skip_sigint:
                case["sigint"] = run_case(args.ctl, root, args.timeout, args.cpu_before_sigint)
            results["cases"][name] = case
            print(json.dumps({name: case}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
