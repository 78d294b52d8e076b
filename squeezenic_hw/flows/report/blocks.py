"""The blocks a plugin build is made of, each synthesised once and counted by instance."""

import re
from dataclasses import dataclass

from amaranth import Cat, Module, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.spec.codecs import DEFAULT_CODECS, codec_info
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS

#: LUTs a distributed-RAM or shift-register cell occupies (UltraScale+ primitives).
LUTS_PER_MEMORY_CELL = {
    "RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM32M16": 8, "RAM32X16DR8": 8,
    "RAM64X1S": 1, "RAM64X1D": 2, "RAM64M": 4, "RAM64M8": 8, "RAM64X8SW": 8,
    "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8, "RAM512X1S": 8,
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}


@dataclass(frozen=True)
class Block:
    """One distinct block to synthesise: a kind and its constructor parameters.

    Picklable and hashable; :meth:`make` builds the component. Kinds:
    ``tx_lane`` (codecs, mtu, port: a host-facing lane), ``gen_lane`` (codec specs, mtu,
    port, max_elements: a generator and its TX lane, the one module per lane
    ``generate`` writes, :class:`~squeezenic_hw.gateware.arrays.lane_arrays.GeneratorLane`),
    ``gen_tx_lane`` (codec specs, mtu, port: a generator's TX lane alone, as
    :func:`~squeezenic_hw.gateware.arrays.lane_arrays.generator_tx_lane` builds it),
    ``rx_lane`` (codecs, max_host_elements, port),
    ``generator`` (max_elements, port), ``checker`` (port), ``arbiter`` (n),
    ``frame_bus`` (n, codecs, port, rings: the arbiter of narrow lanes, its OR taking
    the header bits those lanes may set and the reads of ``rings`` shared rings),
    ``ring_cluster`` (n, rows: a ring shared by n narrow lanes), ``header_finisher``
    (code_bits: completes narrow lanes' frames),
    ``distributor`` (n, port), ``splitter`` (base, n, port), ``register_file``
    (the map's :class:`~.params.PluginParams` fields), ``core`` (every PluginParams field),
    ``plugin`` (every PluginParams field: the whole plugin's Verilog as ``generate``
    writes it, ``squeezenic_250mhz.v``).

    A ``mapping`` parameter (``"abc9"``) synthesises the block with that LUT mapping
    (:data:`~squeezenic_hw.flows.synth.MAPPINGS`) instead of the project's.
    """
    kind: str
    params: tuple    # ((name, value), ...), sorted by name

    @classmethod
    def of(cls, kind, **params):
        return cls(kind, tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                      for k, v in params.items())))

    @property
    def args(self):
        return dict(self.params)

    @property
    def mapping(self):
        """The LUT mapping to synthesise with (``"abc"``, the project's, by default)."""
        return self.args.get("mapping", "abc")

    @property
    def label(self):
        a = self.args
        if self.mapping != "abc":
            plain = Block(self.kind, tuple(p for p in self.params if p[0] != "mapping"))
            return f"{plain.label}[{self.mapping}]"
        if self.kind in ("tx_lane", "rx_lane", "gen_tx_lane", "gen_lane"):
            return f"{self.kind}({'+'.join(a['codecs'])})"
        if self.kind == "header_finisher":
            return f"header_finisher({a['code_bits']}-bit)"
        if self.kind in ("arbiter", "frame_bus", "distributor", "splitter", "ring_cluster"):
            return f"{self.kind}({a['n']})"
        if self.kind == "register_file":
            return f"register_file({a['host_bw']}G{',loopback' if a.get('loopback') else ''})"
        if self.kind == "core":
            return f"core({a['host_bw']}G,{'+'.join(a['codecs'])})"
        if self.kind == "plugin":
            default = tuple(sorted(codec_info(c).name for c in DEFAULT_CODECS))
            parts = [f"{a['host_bw']}G"] + (["loopback"] if a.get("loopback") else [])
            if tuple(sorted(a["codecs"])) != default:
                parts.append("+".join(a["codecs"]))
            return f"plugin({','.join(parts)})"
        return self.kind

    @property
    def top(self):
        """Verilog name of the block's top module (a generator's TX lane is named as a
        host lane, so that the same lane is the same Verilog and one cached synthesis)."""
        if self.kind == "plugin":
            from squeezenic_hw.gateware.opennic.plugin import MODULE_NAME
            return MODULE_NAME
        return "tx_lane" if self.kind == "gen_tx_lane" else self.kind

    def spec(self):
        """JSON-able ``{"kind": ..., <params>}``."""
        return {"kind": self.kind, **{k: list(v) if isinstance(v, tuple) else v
                                      for k, v in self.params}}

    def make(self):
        """A fresh component of this block (for ``plugin``, its Verilog text)."""
        a = {k: v for k, v in self.args.items() if k != "mapping"}
        k = self.kind
        if k == "tx_lane":
            from squeezenic_hw.gateware.tx.lane import TxLane
            return TxLane(codecs=a["codecs"], mtu=a["mtu"], port=a["port"], idle_timeout=None)
        if k == "gen_tx_lane":
            from squeezenic_hw.gateware.arrays.lane_arrays import generator_tx_lane
            return generator_tx_lane(list(a["codecs"]), mtu=a["mtu"], port=a["port"])
        if k == "gen_lane":
            from squeezenic_hw.gateware.arrays.lane_arrays import GeneratorLane
            return GeneratorLane(list(a["codecs"]), mtu=a["mtu"], port=a["port"],
                                 max_elements=a["max_elements"])
        if k == "rx_lane":
            from squeezenic_hw.gateware.rx.lane import RxLane
            return RxLane(codecs=a["codecs"], max_host_elements=a["max_host_elements"],
                          port=a["port"])
        if k == "generator":
            from squeezenic_hw.gateware.arrays.generator import GradientGenerator
            from squeezenic_hw.spec.frames import Header
            # as TxArray builds it: frames to the lanes' port
            return GradientGenerator(a["max_elements"], template=Header(dst_port=a["port"]))
        if k == "checker":
            from squeezenic_hw.gateware.arrays.checker import FrameChecker
            return FrameChecker(port=a["port"])
        if k == "arbiter":
            from squeezenic_hw.gateware.common.frame_arbiter import FrameArbiter
            return FrameArbiter(a["n"])
        if k == "frame_bus":
            from squeezenic_hw.gateware.arrays.frame_bus import FrameBusArbiter
            from squeezenic_hw.gateware.arrays.lane_arrays import generator_head_mask
            mask = generator_head_mask(list(a["codecs"]), port=a["port"])
            return _InputChainHarness(FrameBusArbiter(a["n"], head_mask=mask,
                                                      shared_rows=a["rings"]))
        if k == "ring_cluster":
            from squeezenic_hw.gateware.arrays.ring_cluster import RingCluster
            return RingCluster(a["n"], a["rows"])
        if k == "header_finisher":
            from squeezenic_hw.gateware.arrays.header_finisher import HeaderFinisher
            return HeaderFinisher(a["code_bits"])
        if k == "distributor":
            from squeezenic_hw.gateware.arrays.distributor import FrameDistributor
            return FrameDistributor(a["n"], port=a["port"])
        if k == "splitter":
            from squeezenic_hw.gateware.arrays.source_port_splitter import SourcePortSplitter
            return SourcePortSplitter(a["base"], a["n"], port=a["port"])
        if k == "register_file":
            from squeezenic_hw.regmap.plugin import plugin_register_map
            return _RegisterFileHarness(plugin_register_map(_plugin_params(a)))
        if k == "core":
            from squeezenic_hw.gateware.opennic.core import SqueezeNicCore
            return SqueezeNicCore(_plugin_params(a))
        if k == "plugin":
            from squeezenic_hw.flows.opennic import plugin_verilog
            return plugin_verilog(_plugin_params(a))[1]
        raise ValueError(f"unknown block kind {k!r}")


class _RegisterFileHarness(wiring.Component):
    """The register file, each read-only input fed by a short shift register.

    At 64 lanes the register file has ~125 k bits of read-only inputs, more than a
    top-level design may have (Amaranth numbers the input bits in 16 bits). Each
    read-only field gets its own shift register, fed by one bit of ``chain_in`` (one
    bit per field) and ending at one bit of ``chain_out``; each of its flip-flops drives
    the next one and one read-only input, so none is trimmed or becomes an SRL: exactly
    ``chain_bits`` flip-flops and no LUT, which :func:`~.cache.synth_block` subtracts
    (``ff_wrapper``). The registers are short (≤ 64 bits) because one long chain
    exhausts the call stack of Yosys's topological sort in WebAssembly.
    """

    def __init__(self, regmap):
        from squeezenic_hw.gateware.axil.bus import AxiLiteSignature
        from squeezenic_hw.gateware.axil.register_file import AxiLiteRegisterFile

        self.rf = AxiLiteRegisterFile(regmap)
        self.chain_bits = sum(self.rf.ro_fields.values())
        assert self.chain_bits == _ro_bits(regmap)
        n = len(self.rf.ro_fields)
        members = self.rf.signature.members
        super().__init__({"axil": In(AxiLiteSignature()), "rw": members["rw"],
                          "pulse": members["pulse"], "chain_in": In(max(n, 1)),
                          "chain_out": Out(max(n, 1))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.rf = rf = self.rf
        wiring.connect(m, wiring.flipped(self.axil), rf.axil)
        wiring.connect(m, rf.rw, wiring.flipped(self.rw))
        wiring.connect(m, rf.pulse, wiring.flipped(self.pulse))
        for k, (name, width) in enumerate(rf.ro_fields.items()):
            m.d.comb += getattr(rf.ro, name).eq(
                _shift_register(m, f"shift_{name}", width, self.chain_in[k], self.chain_out[k]))
        return m


def _shift_register(m, name, width, first, last):
    """``width`` flip-flops, each driving the next: bit 0 takes ``first``, ``last`` the
    top bit. A harness's input source that Yosys can neither trim nor map to an SRL."""
    shift = Signal(width, name=name)
    m.d.sync += shift.eq(Cat(first, shift[:-1]))
    m.d.comb += last.eq(shift[-1])
    return shift


class _InputChainHarness(wiring.Component):
    """``inner`` with every input fed by short shift registers, as the register file's
    harness: for a block with more input bits than a top-level design may have (a frame
    bus of 64 lanes: 74 k). Each register of at most 1,024 bits is fed by one bit of
    ``chain_in`` and ends at one bit of ``chain_out``; its ``chain_bits`` flip-flops take
    no LUT and are subtracted (``ff_wrapper``). The outputs are the harness's."""

    def __init__(self, inner, chunk=1024):
        self.inner = inner
        ins, outs = [], {}
        for path, member, _ in inner.signature.flatten(inner):
            if member.flow == In:
                ins.append(path)
            else:
                outs["__".join(str(p) for p in path)] = Out(member.shape)
        self._ins = ins
        self.chain_bits = sum(len(_lookup(inner, p)) for p in ins)
        self._chunks = -(-self.chain_bits // chunk)
        self._chunk = chunk
        super().__init__({"chain_in": In(self._chunks), "chain_out": Out(self._chunks), **outs})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        bits = Cat(*[_lookup(inner, p) for p in self._ins])
        for k in range(self._chunks):
            width = min(self._chunk, len(bits) - k * self._chunk)
            m.d.comb += bits[k * self._chunk:k * self._chunk + width].eq(
                _shift_register(m, f"shift{k}", width, self.chain_in[k], self.chain_out[k]))
        for path, member, _ in inner.signature.flatten(inner):
            if member.flow == Out:
                m.d.comb += getattr(self, "__".join(str(p) for p in path)).eq(
                    _lookup(inner, path))
        return m


def _frame_bus_input_bits(n, rings):
    """Input bits of a ``FrameBusArbiter(n, shared_rows=rings)`` (what its harness
    chains): every lane's outputs, the rings' rows and ``o.ready``; worked out from the
    signature, building nothing."""
    from squeezenic_hw.gateware.common.layouts import BEAT_BITS, frame_bus_signature

    lane = sum(Shape.cast(member.shape).width
               for member in frame_bus_signature().members.values() if member.flow == Out)
    return n * lane + rings * BEAT_BITS + 1


def _lookup(obj, path):
    """The value at ``path`` (names and indices) of an interface object."""
    for p in path:
        obj = obj[p] if isinstance(p, int) else getattr(obj, p)
    return obj.as_value() if hasattr(obj, "as_value") else obj


def _plugin_params(args):
    from squeezenic_hw.build.params import PluginParams
    return PluginParams(**{k: v for k, v in args.items()})


def _params_of(params):
    """``PluginParams`` fields as Block parameters (codecs as names)."""
    d = params.as_dict()
    d.pop("gen_lanes")
    d.pop("rx_lanes")
    d["codecs"] = params.codec_names
    d["gen_codecs"] = tuple(params.gen_codecs)
    return d


def plugin_blocks(params):
    """``[(Block, count), ...]`` of the plugin built with ``params`` (a PluginParams).

    Per interface a host TX and RX lane (``codecs``); with ``gen_lanes`` N > 0 on
    interface 0: N generator lanes (a generator and its TX lane of ``gen_codecs``, one
    block as ``generate`` writes one module), a
    FrameArbiter(N) over them (TxArray; for narrow lanes a FrameBusArbiter(N), then a
    HeaderFinisher) and a
    FrameArbiter(2) of the host lane and
    the array; with ``loopback`` also a SourcePortSplitter, a FrameDistributor(M)
    (RxArray), M RX lanes (``gen_codecs``) and M checkers, M = ``rx_lanes``; one
    register file of :func:`~squeezenic_hw.regmap.plugin.plugin_register_map`.
    """
    p = params
    codecs, gen_names = p.codec_names, p.gen_codec_names
    n, intf, rx = p.gen_lanes, p.num_intf, p.rx_lanes
    out = [
        (Block.of("tx_lane", codecs=codecs, mtu=p.mtu, port=p.port), intf),
        (Block.of("rx_lane", codecs=codecs, max_host_elements=p.max_host_elements,
                  port=p.port), intf),
    ]
    if n:
        out.append((Block.of("gen_lane", codecs=tuple(p.gen_codecs), mtu=p.mtu, port=p.port,
                             max_elements=DEFAULT_HOST_ELEMENTS), n))
        if p.gen_held is not None:
            from squeezenic_hw.gateware.arrays.lane_arrays import (
                finisher_code_bits,
                shared_rings,
            )
            rows, sizes = shared_rings(p.gen_codecs, n, mtu=p.mtu) or (None, [])
            out.append((Block.of("frame_bus", n=n, codecs=tuple(p.gen_codecs), port=p.port,
                                 rings=len(sizes)), 1))
            out += [(Block.of("ring_cluster", n=size, rows=rows), 1) for size in sizes]
            out.append((Block.of("header_finisher",
                                 code_bits=finisher_code_bits(p.gen_codecs)), 1))
        else:
            out.append((Block.of("arbiter", n=n), 1))
        out.append((Block.of("arbiter", n=2), 1))
    if rx:
        out += [
            (Block.of("splitter", base=p.src_port_base, n=n, port=p.port), 1),
            (Block.of("distributor", n=rx, port=p.port), 1),
            (Block.of("rx_lane", codecs=gen_names, max_host_elements=p.max_host_elements,
                      port=p.port), rx),
            (Block.of("checker", port=p.port), rx),
        ]
    reg = {k: v for k, v in _params_of(p).items()
           if k in ("num_intf", "host_bw", "port", "idle_timeout", "gen_codecs", "loopback")}
    out.append((Block.of("register_file", **reg), 1))
    counts = {}
    # blocks that coincide (arbiter(2) when N = 2, an RX lane of the same codecs, the
    # rings of one size) add up
    for block, count in out:
        counts[block] = counts.get(block, 0) + count
    return list(counts.items())


def core_block(params):
    """The whole :class:`~squeezenic_hw.gateware.opennic.core.SqueezeNicCore` as a Block."""
    return Block.of("core", **_params_of(params))


def plugin_block(params, *, mapping="abc"):
    """The whole plugin as ``generate`` writes it (``squeezenic_250mhz.v``) as a Block,
    synthesised with ``mapping``."""
    extra = {} if mapping == "abc" else {"mapping": mapping}
    return Block.of("plugin", **_params_of(params), **extra)


def lut_mem(cells):
    """LUTs used as distributed RAM or shift registers, from ``{cell type: count}``.

    A memory cell type missing from :data:`LUTS_PER_MEMORY_CELL` counts one LUT.
    """
    total = 0
    for cell, count in cells.items():
        if cell in LUTS_PER_MEMORY_CELL:
            total += LUTS_PER_MEMORY_CELL[cell] * count
        elif re.fullmatch(r"RAM\d+(X\d+\w*|M\d*)|SRLC?(16|32)E?\w*", cell):
            total += count
    return total


def _adjusted(block, record):
    """A block's figures without its synthesis harness (the register file's and the
    frame bus's input chains)."""
    if block.kind not in ("register_file", "frame_bus") or "ff_wrapper" in record:
        return record
    if block.kind == "frame_bus":
        bits = _frame_bus_input_bits(block.args["n"], block.args["rings"])
    else:
        from squeezenic_hw.regmap.plugin import plugin_register_map

        bits = _ro_bits(plugin_register_map(_plugin_params(block.args)))
    return record | {"ff": record["ff"] - bits, "ff_wrapper": bits}


def _ro_bits(regmap):
    """Bits of the register file's read-only inputs (its ``ro_fields``, from the map)."""
    fields = {}
    for r in regmap:
        if r.access in ("rw", "w1p"):
            continue
        if r.counter64 is not None:
            fields[r.counter64] = 64
        else:
            fields[r.name] = r.width
    return sum(fields.values())
