"""A block through Yosys's ABC9 mapping as the whole plugin maps it: beside a long carry
chain, so that ABC9 maps the block's cones for area, not depth (``docs/report.md``).

Usage::

    python bench/abc9_in_context.py "WirePacker([1, 2, 3, 4, 8], registered_ready=True)" \\
        [--chain 512] [--over 2.9] [--workdir DIR] [--format table|csv|json]

The expression is evaluated with the gateware's components in scope (``WirePacker``,
``TxLane``, ``RxLane``, ...). Alone, a block is mapped for depth (nothing deeper is beside
it) and its paths look better than they are inside the plugin; beside a registered
``--chain``-bit adder (0: alone) they come out as there. One row per endpoint family of
the block whose worst path is over ``--over`` ns (the chain's own paths left out):
``family``, ``est_ns``, ``over_budget``, ``endpoints``, ``lut_levels``, ``path``; and
the block's ``LUT``/``FF`` (the chain's adder is about one LUT per bit) on stderr.
"""

import argparse
import re
import sys

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.cli.output import add_format_option, render
from squeezenic_hw.flows import synth, timing

SCOPE = """
from squeezenic_hw.gateware.tx.packer import WirePacker
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.gateware.rx.lane import RxLane
from squeezenic_hw.gateware.reduce.adder import ReduceAdder
from squeezenic_hw.gateware.reduce.checker import ReduceChecker
"""


class BesideChain(wiring.Component):
    """``dut`` with its ports as ``dut__<name>``, and a registered ``bits``-bit adder."""

    def __init__(self, dut, bits):
        self.dut, self.bits = dut, bits
        members = {f"dut__{name}": member for name, member in dut.signature.members.items()}
        super().__init__({**members, "a": In(bits), "b": In(bits), "s": Out(bits)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        for name, member in self.dut.signature.members.items():
            outer, inner = getattr(self, f"dut__{name}"), getattr(self.dut, name)
            if not member.is_port:
                wiring.connect(m, wiring.flipped(outer), inner)
            elif member.flow == In:
                m.d.comb += inner.eq(outer)
            else:
                m.d.comb += outer.eq(inner)
        a, b = Signal(self.bits), Signal(self.bits)
        m.d.sync += [a.eq(self.a), b.eq(self.b), self.s.eq(a + b)]
        return m


def _family(name):
    """An endpoint's family: its first three name parts, digits folded."""
    return re.sub(r"\d+", "#", ".".join(name.split(".")[:3]).split("[")[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("block", help="a Python expression that makes the component")
    parser.add_argument("--chain", type=int, default=512, help="the adder's bits (0: alone)")
    parser.add_argument("--over", type=float, default=2.9, help="families shown from (ns)")
    parser.add_argument("--workdir", default=None)
    add_format_option(parser)
    args = parser.parse_args(argv)
    scope = {}
    exec(SCOPE, scope)
    dut = eval(args.block, scope)
    top = BesideChain(dut, args.chain) if args.chain else dut
    result = synth.synthesize(top, timing=True, mapping="abc9", workdir=args.workdir)
    estimate = timing.estimate(result.netlist_path, group_by=_family)
    rows = [{"family": b.name, "est_ns": round(b.est_ns, 3), "over_budget": b.over_budget,
             "endpoints": b.endpoints, "lut_levels": b.worst.lut_levels,
             "path": f"{b.worst.start} -> {b.worst.end}"}
            for b in estimate.blocks
            if b.worst and b.est_ns >= args.over and not (args.chain and b.name == "s")]
    print(f"LUT {result.lut}, FF {result.ff}", file=sys.stderr)
    print(render(rows, ["family", "est_ns", "over_budget", "endpoints", "lut_levels", "path"],
                 args.format, title="block paths under ABC9"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
