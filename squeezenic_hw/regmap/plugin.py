"""The AXI-Lite register map of the OpenNIC user plugin.

:func:`plugin_register_map` turns a build's
:class:`~squeezenic_hw.build.params.PluginParams` into the
:class:`~squeezenic_hw.regmap.registers.RegisterMap` that the gateware decodes and that
``generate`` writes as JSON, a C header and Markdown (``docs/registers.md`` documents
the default build).

Layout (byte offsets in the plugin's window of the box's BAR2 space):

========== =============================================================
0x0000     global: ID, version, build parameters, enable, UDP port,
           idle timeout, TX close, scratch
0x0100     generator controls (builds with ``host_bw`` > 100)
0x0400     the reduce lane (builds with ``reduce``): its configuration, header
           template, ``sign`` table and start, then its counters
0x1000     host interface ``i`` at ``0x1000 + 0x400·i``: TX lane counters,
           then RX lane counters at ``+0x200``
0x2000     generator lane ``k`` at ``0x2000 + 0x200·k``: frames sent, TX
           counters, then (``loopback`` builds, ``k`` < ``rx_lanes``) loopback RX
           lane ``k``'s counters and its checker's
========== =============================================================
"""

from squeezenic_hw import __version__
from squeezenic_hw.spec.counters import (
    CONTRIBUTION_COUNTERS,
    REDUCE_COUNTERS,
    RX_COUNTERS,
    TX_COUNTERS,
)
from squeezenic_hw.spec.generator import GeneratorConfig, config_values

from .registers import RegisterMap

__all__ = ["plugin_register_map", "held_registers", "PLUGIN_ID", "version_word",
           "GENERATOR_REGISTERS", "generator_settings", "CHECKER_COUNTERS", "GLOBAL_BASE",
           "GENERATOR_BASE", "HOST_BASE", "HOST_STRIDE", "LANE_BASE", "LANE_STRIDE",
           "REDUCE_BASE", "REDUCE_REGISTERS", "REDUCE_TEMPLATE_WORDS"]

#: Value of the ``id`` register: ASCII "SQZN".
PLUGIN_ID = 0x53515A4E
GLOBAL_BASE = 0x0000
GENERATOR_BASE = 0x0100
REDUCE_BASE = 0x0400
HOST_BASE = 0x1000
HOST_STRIDE = 0x400
HOST_RX = 0x200
LANE_BASE = 0x2000
LANE_STRIDE = 0x200

#: Generator control registers: (name, width, doc). Resets come from
#: :class:`~squeezenic_hw.reference.generator.GeneratorConfig`'s defaults.
GENERATOR_REGISTERS = (
    ("n_frames", 32, "frames per generator after start (0: until stopped)"),
    ("elements", 16, "fp32 elements per host frame"),
    ("codec", 8, "codec id written in the frames' header"),
    ("param", 8, "codec parameter"),
    ("stochastic", 1, "stochastic rounding flag"),
    ("scale", 32, "scale field (fp32 bits)"),
    ("aux", 32, "aux field (fp32 bits)"),
    ("seed", 32, "RNG seed field of the frames"),
    ("value_seed", 32, "value seed of lane 0 (lane k uses value_seed + k)"),
    ("offset", 32, "tensor offset of the first frame"),
    ("flush_every", 16, "set the flush flag every this many frames (0: never)"),
    ("rate_bytes_per_cycle", 16, "frame bytes per 250 MHz cycle, Q8.8 (0x3200 = 100 Gb/s)"),
)

#: The reduce lane's configuration registers (``docs/wire-format.md`` section 8): (name,
#: width, doc); each is ``reduce_<name>``, the field of the same name of
#: :class:`~squeezenic_hw.gateware.reduce.layouts.ReduceConfig`. Write them while
#: ``reduce_enable`` is 0.
REDUCE_REGISTERS = (
    ("enable", 1, "1: the node takes its ring's frames and its host's contributions; "
                  "0: it passes every frame on and forgets its expected offsets"),
    ("nodes", 5, "N, the ring's nodes (2 to 16)"),
    ("rank", 4, "r, this node's place in the ring"),
    ("codec", 8, "the ring's codec id (a reduce codec of the build)"),
    ("param", 8, "its parameter (fixed/qsgd bits, else 0)"),
    ("stochastic", 1, "the stochastic flag the ring's frames carry"),
    ("scale", 32, "the ring's scale (fp32 bits)"),
    ("aux", 32, "the ring's aux (fp32 bits)"),
    ("elements", 32, "E, the tensor's elements"),
    ("chunk", 32, "C = ceil(E / N)"),
    ("chunks", 5, "K = ceil(E / C), the non-empty chunks (0 when E = 0)"),
    ("seed", 32, "this node's encode seed: the ring's seed + r"),
)
#: 32-bit words of the reduce lane's header template (one 64-byte header).
REDUCE_TEMPLATE_WORDS = 16

#: Checker counters of a generator lane: (name, bits).
CHECKER_COUNTERS = (("frames", 64), ("elements", 64), ("bytes", 64), ("gaps", 64),
                    ("last_offset_end", 32), ("bypass", 64), ("crc", 32))


def version_word(version=__version__):
    """``major << 16 | minor << 8 | patch`` of a ``"major.minor.patch"`` string."""
    parts = [int(p) for p in version.split(".")[:3]] + [0, 0]
    return (parts[0] & 0xFFFF) << 16 | (parts[1] & 0xFF) << 8 | (parts[2] & 0xFF)


def plugin_register_map(params):
    """The :class:`~squeezenic_hw.regmap.registers.RegisterMap` of a plugin built with
    ``params``."""
    p = params
    rm = RegisterMap()
    g = "global"
    rm.add("id", access="ro", offset=GLOBAL_BASE, doc='0x53515A4E, ASCII "SQZN"', group=g)
    rm.add("version", access="ro", doc="squeezenic-hw version: major<<16 | minor<<8 | patch",
           group=g)
    for name, doc in (("build_num_intf", "host/wire interfaces (NUM_PHYS_FUNC)"),
                      ("build_gen_lanes", "on-chip generator lanes (0: none)"),
                      ("build_codecs", "bit c set: codec id c built in"),
                      ("build_mtu", "wire MTU in bytes"),
                      ("build_port", "SqueezeNIC UDP port of the build (reset of udp_port)"),
                      ("build_max_host_elements", "largest RX host frame, elements"),
                      ("build_src_port_base", "UDP source port of generator lane 0")):
        rm.add(name, access="ro", doc=doc, group=g)
    rm.add("enable", access="rw", width=1, reset=1, group=g,
           doc="1: compress/expand; 0: every frame passes through unchanged (counted as "
               "bypass other_port) on the host lanes")
    rm.add("udp_port", access="rw", width=16, reset=p.port, group=g,
           doc="SqueezeNIC UDP destination port of the host lanes")
    rm.add("idle_timeout", access="rw", reset=p.idle_timeout, group=g,
           doc="cycles without a host frame before the open wire frame closes (0: never)")
    rm.add("tx_close", access="w1p", width=p.num_intf, group=g,
           doc="bit i: close interface i's open wire frame now")
    rm.add("scratch", access="rw", group=g, doc="free for software (bus test)")
    rm.add("build_rx_lanes", access="ro", group=g,
           doc="loopback RX lanes with checkers (0: none, the TX-only build)")
    rm.add("build_gen_codecs", access="ro", group=g,
           doc="bit c set: codec id c built into the generator lanes")

    if p.gen_lanes:
        g = "generator"
        defaults = _generator_defaults()
        rm.add("gen_start", access="rw", width=1, offset=GENERATOR_BASE, group=g,
               doc="1: generators run (0 stops them at a frame boundary)")
        held = held_registers(p)
        for name, width, doc in GENERATOR_REGISTERS:
            register = f"gen_{name}"
            if register in held:
                doc = f"{doc}; {held[register]}"
            rm.add(register, access="rw", width=width, reset=defaults[name], doc=doc,
                   group=g)
        rm.add("gen_close", access="w1p", width=1, group=g,
               doc="close every generator lane's open wire frame now")

    if p.reduce_codecs:
        _add_reduce(rm)

    for i in range(p.num_intf):
        g = f"host{i}"
        base = HOST_BASE + HOST_STRIDE * i
        for j, name in enumerate(TX_COUNTERS):
            rm.add(f"host{i}_tx_{name}", access="ro", offset=base + 4 * j, group=g,
                   doc=f"TX lane of interface {i}: {name}")
        for j, name in enumerate(RX_COUNTERS):
            rm.add(f"host{i}_rx_{name}", access="ro", offset=base + HOST_RX + 4 * j,
                   group=g, doc=f"RX lane of interface {i}: {name}")

    for k in range(p.gen_lanes):
        g = f"lane{k}"
        rm.add(f"lane{k}_frames_sent", access="ro", offset=LANE_BASE + LANE_STRIDE * k,
               group=g, doc=f"host frames generator {k} has sent")
        for name in p.gen_tx_counters:
            rm.add(f"lane{k}_tx_{name}", access="ro", group=g, doc=f"TX lane {k}: {name}")
        if k >= p.rx_lanes:
            continue
        for name in RX_COUNTERS:
            rm.add(f"lane{k}_rx_{name}", access="ro", group=g, doc=f"RX lane {k}: {name}")
        for name, bits in CHECKER_COUNTERS:
            doc = f"checker {k}: {name}"
            if bits == 64:
                rm.add_counter64(f"lane{k}_chk_{name}", doc=doc, group=g)
            else:
                rm.add(f"lane{k}_chk_{name}", access="ro", group=g, doc=doc)
    return rm


def _add_reduce(rm):
    g = "reduce"
    for k, (name, width, doc) in enumerate(REDUCE_REGISTERS):
        rm.add(f"reduce_{name}", access="rw", width=width, group=g, doc=doc,
               offset=REDUCE_BASE if k == 0 else None)
    for k in range(REDUCE_TEMPLATE_WORDS):
        rm.add(f"reduce_template{k}", access="rw", group=g,
               doc=f"bytes {4 * k}-{4 * k + 3} of the node's header for its successor and "
                   "its host's result frames (little-endian; the lane writes lengths, "
                   "checksum, flags, n and bytes 56-63)")
    rm.add("reduce_table_addr", access="rw", width=5, group=g,
           doc="sign table: the entry reduce_table_write writes (n1, 0 to N)")
    rm.add("reduce_table_data", access="rw", group=g,
           doc="sign table: the value of n1 1-codes, fl32(fl32(n0*scale) + fl32(n1*aux)) "
               "(fp32 bits)")
    rm.add("reduce_table_write", access="w1p", width=1, group=g,
           doc="write reduce_table_data into entry reduce_table_addr")
    for name in REDUCE_COUNTERS + CONTRIBUTION_COUNTERS:
        what, reason = name.split("_", 1)
        whose = ("reduce frames from the predecessor" if what == "reduce"
                 else "contribution frames from the host")
        rm.add(f"count_{name}", access="ro", group=g,
               doc=f"{whose}: taken" if reason == "taken"
               else f"{whose}: passed on, reason {reason}")
    rm.add("count_reduce_overflows", access="ro", group=g,
           doc="reduce frames bypassed for want of room in the adder's wire queue")


def held_registers(params):
    """The generator registers whose writes the generator lanes of a narrow build do not
    follow (``params.gen_held``), in register order: register name → what the lanes send
    instead. Empty for wide lanes or none."""
    fixed = params.gen_held
    if fixed is None:
        return {}
    spec = params.gen_codecs[0]
    held = {"gen_codec": f"this build's generators send {spec} (codec {fixed['codec']}) "
                         "whatever is written"}
    if fixed["param"] is not None:
        held["gen_param"] = (f"this build's generators send {fixed['param']} whatever is "
                             "written")
    if fixed["deterministic"]:
        held["gen_stochastic"] = ("this build's generators send 0 (nearest) whatever is "
                                  "written")
    if fixed["pow2_scale"]:
        held["gen_scale"] = ("this build's generators send its sign and exponent only, a "
                             "power of two (fraction bits cleared, a NaN kept)")
    return held


def generator_settings(config, n_frames):
    """``{register name: value}`` that set the generators to ``config`` (a
    :class:`GeneratorConfig`) and ``n_frames`` frames: every ``gen_`` register of
    :data:`GENERATOR_REGISTERS` (not ``gen_start``)."""
    values = {**config_values(config), "n_frames": n_frames}
    return {f"gen_{name}": values[name] for name, _, _ in GENERATOR_REGISTERS}


def _generator_defaults():
    values = config_values(GeneratorConfig())
    values["n_frames"] = 0
    return values


def build_constants(params):
    """Values of the read-only global registers."""
    p = params
    return {"id": PLUGIN_ID, "version": version_word(), "build_num_intf": p.num_intf,
            "build_gen_lanes": p.gen_lanes, "build_codecs": p.codec_mask,
            "build_mtu": p.mtu, "build_port": p.port,
            "build_max_host_elements": p.max_host_elements,
            "build_src_port_base": p.src_port_base, "build_rx_lanes": p.rx_lanes,
            "build_gen_codecs": p.gen_codec_mask}
