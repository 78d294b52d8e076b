"""The bulk fuzz campaign over several builds of the lanes, one campaign per build.

Run from the repository root (the package must be installed, ``pip install -e .``)::

    python bench/fuzz_builds.py                          # every build, 20,000 frames each
    python bench/fuzz_builds.py --frames 2000 --only jumbo,minimum --format json

``squeezenic-hw fuzz`` builds the lanes once per campaign; the build options (``--mtu``,
``--max-host-elements``, ``--port``, ``--trusted``, ``--code-bits``, ``--narrow``,
``--codecs``) are options of the campaign. This runs the campaign on each build of
:data:`BUILDS`, timed (``--timed``: a quarter of the batches at set cycles around an idle
timeout), the seed ``--seed`` plus the build's index, and gives one row per build:

``build``, ``options``
    the build's name and its ``fuzz`` options;
``frames``, ``rx_frames``
    host frames into the TX lane, wire frames into the RX lane;
``timed``, ``held``
    timed batches, and those whose TX lane held its input back (judged as stalled);
``idle_closes``, ``bypass_frames``
    the TX lane's ``close_idle`` and ``bypass_frames`` counters over the campaign;
``mismatches``
    batches whose frames or counters differ from the reference (the first one's pcaps are
    in ``-o``/<build>);
``build_s``, ``wall_s``
    the models' build (0 when cached) and the campaign's wall time, in seconds.

Exit status 1 when a campaign has a mismatch or fails, else 0.
"""

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

from squeezenic_hw.cli import main as cli_main
from squeezenic_hw.cli.output import render

ALL_CODECS = "0,1,2,3,4,5,6,7"

#: name → ``fuzz`` options of the build.
BUILDS = {
    "default": [],
    "all codecs": ["--codecs", ALL_CODECS],
    "jumbo": ["--mtu", "9600", "--max-host-elements", "2000"],
    "small mtu": ["--mtu", "200", "--codecs", ALL_CODECS],
    "minimum": ["--mtu", "68", "--max-host-elements", "16"],
    "other port": ["--port", "4791"],
    "trusted 5-bit": ["--trusted", "--code-bits", "5", "--codecs", "fixed,qsgd"],
    "narrow fixed:4": ["--narrow", "--codecs", "fixed", "--code-bits", "4"],
    "narrow sign": ["--narrow", "--codecs", "sign"],
}
COLUMNS = ["build", "options", "frames", "rx_frames", "timed", "held", "idle_closes",
           "bypass_frames", "mismatches", "build_s", "wall_s"]


def campaign(name, options, args, seed):
    """The row of one build's campaign."""
    argv = ["fuzz", *options, "--timed", "--frames", str(args.frames), "--seed", str(seed),
            "--idle", str(args.idle), "--backpressure", str(args.backpressure),
            "-o", str(Path(args.output) / name.replace(" ", "-")), "--format", "json"]
    if args.cache_dir:
        argv += ["--cache-dir", args.cache_dir]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(argv)
    row = {"build": name, "options": " ".join(options)}
    if status not in (0, 1):
        return {**row, "mismatches": None, "status": status}
    r = json.loads(out.getvalue())
    tx = r["counters"]["tx"]
    return {**row, "frames": r["frames"], "rx_frames": r["rx_frames"],
            "timed": r["timed_batches"], "held": r["held_timed_batches"],
            "idle_closes": tx["close_idle"], "bypass_frames": tx["bypass_frames"],
            "mismatches": r["mismatches"],
            "build_s": 0.0 if r["build_cached"] else r["build_seconds"],
            "wall_s": r["wall_seconds"], "status": status}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=20_000,
                   help="host frames per build (default 20000)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the first build's campaign; build k takes seed + k")
    p.add_argument("--idle", type=float, default=0.1, help="as fuzz's (default 0.1)")
    p.add_argument("--backpressure", type=float, default=0.2,
                   help="as fuzz's (default 0.2)")
    p.add_argument("--only", help="comma-separated build names (default: all of "
                                  + ", ".join(BUILDS) + ")")
    p.add_argument("--cache-dir", help="fuzz's --cache-dir (default the user cache's sim)")
    p.add_argument("-o", "--output", default="build/fuzz-builds",
                   help="a folder per build for a mismatch's pcaps (default build/fuzz-builds)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    a = p.parse_args(argv)
    names = list(BUILDS) if a.only is None else [n.strip() for n in a.only.split(",")]
    unknown = [n for n in names if n not in BUILDS]
    if unknown or not names:
        p.error(f"--only: unknown build {', '.join(unknown) or '(none)'}; "
                f"builds: {', '.join(BUILDS)}")
    rows = []
    for k, name in enumerate(names):
        print(f"[{k + 1}/{len(names)}] {name}: fuzz {' '.join(BUILDS[name])} ...",
              file=sys.stderr, flush=True)
        row = campaign(name, BUILDS[name], a, a.seed + list(BUILDS).index(name))
        rows.append(row)
        print(f"    {row.get('mismatches')} mismatches, {row.get('wall_s')} s",
              file=sys.stderr, flush=True)
    sys.stdout.write(render(rows, COLUMNS, a.format,
                            title="fuzz campaigns, one per build (--timed)"))
    return 0 if all(r["status"] == 0 and r["mismatches"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
