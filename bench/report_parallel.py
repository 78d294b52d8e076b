"""The report's syntheses in parallel: six small blocks synthesised cold (a new, empty
cache), on a local cluster of ``--jobs`` workers or on the cluster of ``--scheduler``.

Usage::

    python bench/report_parallel.py [--jobs N | --scheduler ADDRESS] [--format ...]

One row: ``how`` (the option), ``wall_s`` (the whole call of ``synthesize_blocks``, the
local cluster's start included), ``yosys_s`` (the Yosys runs' wall times added up) and
``wall_over_yosys``: 1 or a little more for one run at a time, 1/N at best for N in
parallel. The ratio is what to compare on a machine that other work shares, where Yosys
itself runs slower from one call to the next. It calls nothing but
``synthesize_blocks(blocks, jobs=..., cache_dir=...)``, so an older checkout of the
package (``PYTHONPATH=...``) runs it too, without ``--scheduler``.
"""

import argparse
import tempfile
import time

from squeezenic_hw.cli.output import add_format_option, render
from squeezenic_hw.flows.report import Block, synthesize_blocks

BLOCKS = [Block.of("arbiter", n=2), Block.of("arbiter", n=4),
          Block.of("distributor", n=2, port=21329), Block.of("distributor", n=4, port=21329),
          Block.of("splitter", base=0x5000, n=2, port=21329),
          Block.of("splitter", base=0x5000, n=4, port=21329)]

COLUMNS = ["how", "blocks", "wall_s", "yosys_s", "wall_over_yosys"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, default=2, help="local workers (default 2)")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="a running Dask scheduler's address instead")
    add_format_option(parser, extra=("markdown",))
    args = parser.parse_args(argv)
    how = ({"scheduler": args.scheduler} if args.scheduler else {"jobs": args.jobs})
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as cache_dir:
        records = synthesize_blocks(BLOCKS, cache_dir=cache_dir, **how)
    wall = time.monotonic() - start
    yosys = sum(r["synth_s"] for r in records.values())
    row = {"how": " ".join(f"--{k} {v}" for k, v in how.items()), "blocks": len(records),
           "wall_s": round(wall, 1), "yosys_s": round(yosys, 1),
           "wall_over_yosys": round(wall / yosys, 2)}
    print(render([row], COLUMNS, args.format, title="cold synthesis of six small blocks"))


if __name__ == "__main__":
    main()
