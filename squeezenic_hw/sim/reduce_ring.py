"""A ring of simulated NICs doing an all-reduce (``docs/wire-format.md`` section 8): N reduce
lanes (:class:`~squeezenic_hw.gateware.reduce.lane.ReduceLane`) joined in a ring, each fed
its host's contribution frames, on the Amaranth simulator.

:func:`run_ring` returns what every host received (its result frames, and the values
they carry), every link's frames, the cycles the all-reduce took, and the beats each
stream had to carry (for the line-rate figure of ``squeezenic-hw allreduce``).
"""

import random
from dataclasses import dataclass

import numpy as np
from amaranth import Elaboratable, Module, Signal
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.gateware.reduce.adder import CONFIG_CYCLES
from squeezenic_hw.gateware.reduce.lane import ReduceLane
from squeezenic_hw.gateware.reduce.layouts import ReduceConfig
from squeezenic_hw.reference.allreduce import contribution_frames, integer_values
from squeezenic_hw.spec.codecs import codec_info, f32_bits
from squeezenic_hw.spec.frames import Header, build_wire_frame, parse
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, HEADER_LEN
from squeezenic_hw.spec.reduce import (
    INTEGER_CODECS,
    REDUCE_VERSION,
    check_nodes,
    chunk_bounds,
    chunk_size,
    partial_width,
    sums_per_frame,
)

from .axis import frame_beats
from .streams import BeatSender, ReusableSimulation

__all__ = ["LaneRing", "RingRun", "run_ring", "node_config", "write_sign_table",
           "enable_and_start"]

_LAYOUT = data.Layout.cast(AxisBeat)
_LAST_AT = _LAYOUT["last"].offset
_SIZE_AT = _LAYOUT["size"].offset
_DATA_MASK = (1 << 512) - 1


class LaneRing(Elaboratable):
    """``size`` reduce lanes, lane r's ``o`` into lane r + 1's ``i`` through a gate that a
    testbench may close (``gap[r]``: the link idles whatever the lanes offer).

    ``lane_kwargs`` build every lane
    (:class:`~squeezenic_hw.gateware.reduce.lane.ReduceLane`)."""

    def __init__(self, size, **lane_kwargs):
        self.lanes = [ReduceLane(**lane_kwargs) for _ in range(check_nodes(size))]
        self.gap = [Signal(name=f"gap{r}") for r in range(size)]

    def elaborate(self, platform):
        m = Module()
        n = len(self.lanes)
        for r, lane in enumerate(self.lanes):
            m.submodules[f"node{r}"] = lane
        for r, lane in enumerate(self.lanes):
            succ = self.lanes[(r + 1) % n]
            m.d.comb += [
                succ.i.valid.eq(lane.o.valid & ~self.gap[r]),
                succ.i.payload.eq(lane.o.payload),
                lane.o.ready.eq(succ.i.ready & ~self.gap[r]),
            ]
        return m


async def write_sign_table(ctx, targets, nodes, scale, aux):
    """Write the ``sign`` values' table of every one of ``targets`` (components with
    ``table_addr``, ``table_data`` and ``table_we``), as software does when it configures
    a ring of ``nodes`` with ``scale`` and ``aux``: entry n1 is the value of n1 1-codes
    (:func:`~squeezenic_hw.reference.allreduce.integer_values`). Takes N + 1 cycles."""
    for k, v in enumerate(_sign_table(nodes, scale, aux)):
        for t in targets:
            ctx.set(t.table_addr, k)
            ctx.set(t.table_data, int(v))
            ctx.set(t.table_we, 1)
        await ctx.tick()
    for t in targets:
        ctx.set(t.table_we, 0)


def _sign_table(nodes, scale, aux):
    """The ``sign`` values' table of a ring: entry n1, the value of n1 1-codes (u32)."""
    return integer_values(np.arange(nodes + 1), "sign", nodes, scale, aux).view(np.uint32)


async def enable_and_start(ctx, lanes, configs):
    """Let the configuration written settle, write ``configs`` (enabled) and let them
    settle: the all-reduce begins with the hosts' first contribution frames. Takes
    2 · ``CONFIG_CYCLES`` + 1 cycles."""
    await ctx.tick().repeat(CONFIG_CYCLES)
    for lane, cfg in zip(lanes, configs, strict=True):
        ctx.set(lane.cfg, cfg)
    await ctx.tick().repeat(CONFIG_CYCLES + 1)


def node_config(nodes, rank, codec, elements, *, param, scale, aux, seed, stochastic,
                enable=True):
    """Node ``rank``'s :class:`~squeezenic_hw.gateware.reduce.layouts.ReduceConfig`, as
    software writes it (``seed`` the ring's base seed)."""
    info = codec_info(codec)
    chunk = chunk_size(elements, nodes)
    return {"enable": int(enable), "nodes": nodes, "rank": rank, "codec": info.id,
            "param": param, "stochastic": int(bool(stochastic) and info.stochastic),
            "scale": f32_bits(scale), "aux": f32_bits(aux), "elements": elements,
            "chunk": chunk, "chunks": -(-elements // chunk) if chunk else 0,
            "seed": (seed + rank) % 2**32}


def _template(codec, param, scale, aux):
    """The nodes' header: ``Header()``'s addresses with the ring's settings (the bytes the
    lane writes itself are left as they are)."""
    info = codec_info(codec)
    h = Header(version=REDUCE_VERSION, codec=info.id, param=param,
               scale_bits=f32_bits(scale), aux_bits=f32_bits(aux))
    return int.from_bytes(build_wire_frame(h, b"")[:HEADER_LEN], "little")


def _frames_of(beats):
    """The frames (bytes) of a stream's beats."""
    frames, frame = [], []
    for b in beats:
        frame.append(b)
        if (b >> _LAST_AT) & 1:
            size = (frame[0] >> _SIZE_AT) & 0xFFFF
            frames.append(b"".join(int(w & _DATA_MASK).to_bytes(64, "little")
                                   for w in frame)[:size])
            frame = []
    return frames


@dataclass
class RingRun:
    """The outcome of :func:`run_ring`.

    Attributes
    ----------
    results : list of numpy.ndarray
        What each node's host received (float32, E elements), from its result frames.
    result_frames, links, host_other, bypass : list of list of bytes
        Per node: its host's result frames; the frames it sent its successor; the host
        frames it passed on to the TX lane; the frames it bypassed to the RX lane.
    complete : list of bool
        Per node: every element received exactly once.
    cycles : int
        Clock cycles from the first contribution beat offered to the last beat out.
    stream_beats : dict
        The most beats one stream carried: ``host_in``, ``host_out`` and ``link``.
    counters : list of dict
        Per node: the receive checks', the contribution checks' and ``overflows``.
    hop_latency : int
        A hop's pipeline latency: the fewest cycles from a gather frame's first beat on a
        link to its first beat on the next, forwarded (in a ring of two, a reduce frame's
        to its hop's).
    """
    results: list
    result_frames: list
    links: list
    host_other: list
    bypass: list
    complete: list
    cycles: int
    stream_beats: dict
    counters: list
    hop_latency: int


def run_ring(tensors, codec, *, param=0, scale=1.0, aux=1.0, seed=0, stochastic=False,
             mtu=DEFAULT_MTU, max_host_elements=DEFAULT_HOST_ELEMENTS, link_gap=0.0,
             idle=0.0, rng_seed=0, max_cycles=None, progress=None, backend="amaranth",
             cache_dir=None, jobs=2, build_progress=None):
    """Run the ring all-reduce of ``tensors`` (one per node) through a :class:`LaneRing`.

    The lanes are built for this ring alone (its codec, N and ``param``). ``link_gap`` and
    ``idle`` are the probabilities of an idle cycle on each link and before each host
    beat. ``progress(done, total)`` is called every few thousand cycles with the result
    beats received and expected. ``backend`` is ``"amaranth"`` (Amaranth's simulator) or
    ``"compiled"`` (one Verilator model of the lane, instantiated per node:
    :mod:`~.ring_model`; ``cache_dir``, ``jobs`` and ``build_progress`` go to its build).
    The two give the same frames and counters; their cycle figures differ by the random
    draws (each backend has its own generator). Raises ``ValueError`` naming a bad
    argument, and ``RuntimeError`` when the ring stops short of ``max_cycles`` (default:
    ten times the beats of the busiest stream, plus 10 000)."""
    if backend not in ("amaranth", "compiled"):
        raise ValueError(f"backend must be amaranth or compiled, got {backend!r}")
    xs = [np.ascontiguousarray(np.asarray(t, dtype=np.float32)).reshape(-1) for t in tensors]
    nodes = check_nodes(len(xs))
    info = codec_info(codec)
    if info.name not in INTEGER_CODECS:
        raise ValueError(f"codec: the reduce lane reduces {', '.join(INTEGER_CODECS)}, "
                         f"got {info.name}")
    elements = xs[0].size
    stochastic = bool(stochastic) and info.stochastic
    settings = dict(param=param, scale=scale, aux=aux)
    hosts = [contribution_frames(xs[r], r, nodes, info.name, max_host_elements=max_host_elements,
                                 stochastic=stochastic, mtu=mtu, **settings)
             for r in range(nodes)]
    host_beats = [[w for f in frames for w in frame_beats(f)] for frames in hosts]
    width = partial_width(info, param, nodes)
    results_expected = _result_beats(elements, nodes, width, mtu, max_host_elements)
    params = [param] if info.name != "sign" else range(2, 17)
    lane_kwargs = dict(codecs=[info.name], nodes=[nodes], params=params, mtu=mtu,
                       max_host_elements=max_host_elements,
                       out_depth=max(64, -(-(mtu - HEADER_LEN) // 64)))
    busiest = max(max(len(b) for b in host_beats), results_expected)
    max_cycles = max_cycles or 10 * busiest + 10_000
    template = _template(info.name, param, scale, aux)
    configs = [[node_config(nodes, r, info.name, elements, seed=seed, stochastic=stochastic,
                            enable=enable, **settings) for r in range(nodes)]
               for enable in (False, True)]
    # the configuration's schedule (configure() below): the sign table from cycle 0, a
    # cycle an entry, the enabled configuration once it has settled, the hosts' first
    # beats once that has
    enable_at = nodes + 1 + CONFIG_CYCLES
    setup = enable_at + CONFIG_CYCLES + 2
    if backend == "compiled":
        from .ring_model import build_ring_model, run_ring_model

        exe, build = build_ring_model(lane_kwargs, cache_dir=cache_dir, jobs=jobs,
                                      progress=build_progress)
        layout = data.Layout.cast(ReduceConfig)
        got = run_ring_model(
            exe, build["meta"], host_frames=hosts,
            table=[int(v) for v in _sign_table(nodes, scale, aux)],
            configs_off=[layout.const(c).as_bits() for c in configs[0]],
            configs_on=[layout.const(c).as_bits() for c in configs[1]],
            template=template, enable_at=enable_at, setup=setup,
            result_beats=results_expected * nodes, idle=idle, link_gap=link_gap,
            seed=rng_seed, timeout=max_cycles + setup, progress=progress)
        return _ring_run(got.beats, got.link_cycles, got.counters, host_beats, elements,
                         nodes, got.last - got.first)

    ring = LaneRing(nodes, **lane_kwargs)
    lanes = ring.lanes
    state = {"start": None, "last": 0, "done": False}
    out = {name: [[] for _ in range(nodes)] for name in
           ("results", "links", "host_other", "bypass")}
    counters = []
    link_cycles = [[] for _ in range(nodes)]

    async def configure(ctx):
        for lane, cfg in zip(lanes, configs[0], strict=True):
            ctx.set(lane.cfg, cfg)
            ctx.set(lane.template, template)
        await write_sign_table(ctx, lanes, nodes, scale, aux)
        await enable_and_start(ctx, lanes, configs[1])

    def host(r):
        async def bench(ctx):
            sender = BeatSender(ctx, lanes[r].host, idle=idle,
                                rng=random.Random(rng_seed * 1000 + r))
            await sender.wait_until(setup)
            for word in host_beats[r]:
                await sender.send(word)
            await sender.close()
        return bench

    # every output is always ready: one process watches them all, and the links
    outputs = [(name, r, getattr(lane, port))
               for r, lane in enumerate(lanes)
               for name, port in (("results", "results"), ("host_other", "host_other"),
                                  ("bypass", "bypass"))]

    async def watch(ctx):
        for _, _, port in outputs:
            ctx.set(port.ready, 1)
        samples = [s for _, _, port in outputs for s in (port.valid, port.payload)]
        samples += [s for lane in lanes for s in (lane.o.valid, lane.o.ready, lane.o.payload)]
        samples += [lane.host.valid for lane in lanes]
        gaps = random.Random(rng_seed * 1000 + 999)
        t, got = 0, 0
        async for _, _, *values in ctx.tick().sample(*samples):
            t += 1
            k = 0
            for name, r, _ in outputs:
                valid, payload = values[k], values[k + 1]
                k += 2
                if valid:
                    out[name][r].append(_int(payload))
                    state["last"] = t
                    got += name == "results"
            for r in range(nodes):
                valid, ready, payload = values[k], values[k + 1], values[k + 2]
                k += 3
                if valid and ready:
                    out["links"][r].append(_int(payload))
                    link_cycles[r].append(t)
                    state["last"] = t
                if link_gap:
                    ctx.set(ring.gap[r], int(gaps.random() < link_gap))
            if state["start"] is None and any(values[k:k + nodes]):
                state["start"] = t - 1
            if progress is not None and t % 4096 == 0:
                progress(got, results_expected * nodes)
            if got >= results_expected * nodes:
                break
            if t > max_cycles + setup:
                raise RuntimeError(f"the ring stopped: {got} of {results_expected * nodes} "
                                   f"result beats after {t} cycles")
        await ctx.tick().repeat(50)         # nothing more may leave
        for lane in lanes:
            counters.append({
                **{n: ctx.get(getattr(lane.counters, n)) for n in _names(lane.counters)},
                **{n: ctx.get(getattr(lane.contribution_counters, n))
                   for n in _names(lane.contribution_counters)},
                "overflows": ctx.get(lane.overflows)})
        state["done"] = True

    sim = ReusableSimulation(ring)
    sim.run([(configure, True), (watch, False)] + [(host(r), True) for r in range(nodes)])
    return _ring_run(out, link_cycles, counters, host_beats, elements, nodes,
                     state["last"] - (state["start"] or 0))


def _ring_run(out, link_cycles, counters, host_beats, elements, nodes, cycles):
    """The :class:`RingRun` of the beats every stream gave (``out``: per stream name, per
    node)."""
    frames = {name: [_frames_of(beats) for beats in per_node] for name, per_node in out.items()}
    results, complete = [], []
    for r in range(nodes):
        values = np.zeros(elements, dtype=np.float32)
        seen = np.zeros(elements, dtype=np.int64)
        for f in frames["results"][r]:
            h = parse(f)
            values[h.offset:h.offset + h.n] = np.frombuffer(f[HEADER_LEN:], np.float32)
            seen[h.offset:h.offset + h.n] += 1
        results.append(values)
        complete.append(bool((seen == 1).all()))
    return RingRun(
        hop_latency=_hop_latency(out["links"], link_cycles, nodes),
        results=results, result_frames=frames["results"], links=frames["links"],
        host_other=frames["host_other"], bypass=frames["bypass"], complete=complete,
        cycles=cycles,
        stream_beats={"host_in": max(len(b) for b in host_beats),
                      "host_out": max(len(b) for b in out["results"]),
                      "link": max(len(b) for b in out["links"])},
        counters=counters)


def _hop_latency(links, cycles, nodes):
    """A hop's pipeline latency: the fewest cycles from a gather frame's first beat on
    link r to its first beat on link r + 1, forwarded (the same chunk and offset), which
    waits for nothing but the node's pipeline; in a ring of two, which forwards none, from
    a reduce-phase frame's first beat to its hop's (one contribution more)."""
    first = {}
    for r in range(nodes):
        start = True
        for word, t in zip(links[r], cycles[r], strict=True):
            if start:
                d = word & _DATA_MASK
                offset = d >> (8 * 60) & 0xFFFFFFFF
                k, origin = d >> (8 * 56) & 0xFF, d >> (8 * 59) & 0xFF
                first[r, origin, k, offset] = t
            start = bool((word >> _LAST_AT) & 1)

    def gaps(same_k):
        return [t_next - t for (r, origin, k, offset), t in first.items()
                if (k == nodes) == same_k and (t_next := first.get(
                    ((r + 1) % nodes, origin, k if same_k else k + 1, offset))) is not None]
    found = gaps(True) or gaps(False)
    return min(found) if found else 0


def _int(payload):
    return int(payload.as_value().value) if hasattr(payload, "as_value") else int(payload)


def _names(view):
    return list(data.Layout.cast(view.shape()).members)


def _result_beats(elements, nodes, width, mtu, step):
    """Beats of one host's result frames: every chunk's gather frames (``sums_per_frame``
    sums each), each cut into result frames of at most ``step`` values (a header beat and
    a beat per 16 values)."""
    beats = 0
    per_frame = sums_per_frame(width, mtu)
    for c in range(nodes):
        lo, hi = chunk_bounds(elements, nodes, c)
        for start in range(lo, hi, per_frame):
            n = min(per_frame, hi - start)
            for j in range(0, n, step):
                beats += 1 + -(-min(step, n - j) // 16)
    return beats
