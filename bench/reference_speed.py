"""Encode/decode speed of the numpy reference codecs.

Run from the repository root::

    python bench/reference_speed.py                 # 10 M elements, table
    python bench/reference_speed.py --elements 1e6 --format json

For every codec (and both rounding modes where the codec has a stochastic one)
it times ``reference.encode`` and ``reference.decode`` of a gradient-like fp32
tensor (best of ``--repeat`` runs) and prints seconds and M elements/s.
"""

import argparse
import sys
import time

import numpy as np

from squeezenic_hw.cli.output import add_format_option, render
from squeezenic_hw.reference import codecs as ref
from squeezenic_hw.sim.vectors import gradient_like
from squeezenic_hw.spec.codecs import CODECS

COLUMNS = ["codec", "param", "stochastic", "encode_s", "decode_s", "encode_melem_s",
           "decode_melem_s"]


def cases():
    for info in CODECS.values():
        param = 8 if info.param_range else 0
        yield info.name, param, False
        if info.stochastic:
            yield info.name, param, True


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=float, default=10e6, help="tensor size (default 1e7)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case, best kept")
    add_format_option(parser)
    args = parser.parse_args(argv)
    n = int(args.elements)
    if n < 1 or args.repeat < 1:
        parser.error("--elements and --repeat must be positive")
    x = gradient_like(np.random.default_rng(0), n) * np.float32(100)
    rows = []
    for name, param, stochastic in cases():
        kw = dict(param=param, scale=30.0, aux=0.03)
        codes = ref.encode(x, name, seed=1, stochastic=stochastic, **kw)
        enc = best_of(args.repeat, lambda n=name, s=stochastic, k=kw:
                      ref.encode(x, n, seed=1, stochastic=s, **k))
        dec = best_of(args.repeat, lambda n=name, c=codes, k=kw: ref.decode(c, n, **k))
        rows.append({"codec": name, "param": param, "stochastic": stochastic,
                     "encode_s": round(enc, 4), "decode_s": round(dec, 4),
                     "encode_melem_s": round(n / enc / 1e6, 1),
                     "decode_melem_s": round(n / dec / 1e6, 1)})
        print(f"{name} param={param} stochastic={stochastic}: encode {enc:.3f} s, "
              f"decode {dec:.3f} s", file=sys.stderr)
    sys.stdout.write(render(rows, COLUMNS, args.format, title=f"{n} elements"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
