"""Tests of :class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`.

Templates are the headers of frames built by :mod:`squeezenic_hw.spec.frames` with
random fields (some with garbage in the fields the builder rewrites, as a
received frame may carry); the expected header is the first 64 bytes of
``frames.build_wire_frame`` for the parsed template with the new ``flags``,
``n`` and ``offset`` and a payload of ``size - 64`` bytes. Runs under random
idle/backpressure, plus a full-rate run.
"""

import random
import struct
from dataclasses import replace

import numpy as np
import pytest
from amaranth import Module, ResetInserter, Signal, unsigned
from amaranth.back import verilog
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.gateware.lane.header_builder import (
    HeaderBuilder,
    header_request_layout,
    header_result_layout,
)
from squeezenic_hw.sim.streams import run_stream
from squeezenic_hw.spec import frames as F
from squeezenic_hw.spec.codecs import CODECS

from support.shared_duts import shared
from support.unused import rejected

STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
TAG_BITS = 9


def _random_header(rng):
    info = rng.choice(list(CODECS.values()))
    param = 0 if info.param_range is None else rng.randint(*info.param_range)
    return F.Header(
        dst_mac=rng.randbytes(6), src_mac=rng.randbytes(6), ip_tos=rng.randrange(256),
        ip_id=rng.randrange(2**16), ip_frag=rng.choice([0, 0x4000, rng.randrange(2**16)]),
        ttl=rng.randrange(256), protocol=rng.choice([17, 17, rng.randrange(256)]),
        src_ip=rng.randbytes(4), dst_ip=rng.randbytes(4), src_port=rng.randrange(2**16),
        dst_port=rng.choice([F.DEFAULT_PORT, rng.randrange(2**16)]), version=1,
        codec=info.id, param=param, flags=rng.randrange(256), n=rng.randrange(2**16),
        scale_bits=rng.randrange(2**32), aux_bits=rng.randrange(2**32),
        seed=rng.randrange(2**32), offset=rng.randrange(2**32))


def _template(rng):
    """64 header bytes of a host or wire frame; sometimes with stale length/checksum fields."""
    h = _random_header(rng)
    if rng.random() < 0.5:
        n = rng.randrange(0, 30)
        frame = F.build_host_frame(h, np.frombuffer(rng.randbytes(4 * n), dtype=np.float32))
    else:
        frame = F.build_wire_frame(h, rng.randbytes(rng.randrange(0, 100)))
    t = bytearray(frame[:64])
    if rng.random() < 0.5:   # a received header: any UDP checksum, maybe bad lengths/checksum
        t[40:42] = rng.randbytes(2)
        if rng.random() < 0.5:
            t[16:18], t[24:26], t[38:40] = rng.randbytes(2), rng.randbytes(2), rng.randbytes(2)
    return bytes(t)


def expected_header(template, size, n, offset, flags):
    """The reference: ``build_wire_frame`` of the parsed template with the new fields."""
    h = replace(F.parse(template), n=n, offset=offset, flags=flags)
    return F.build_wire_frame(h, bytes(size - F.HEADER_LEN))[:F.HEADER_LEN]


def _edge_request(rng, carry):
    """A template and size whose new checksum is at an edge of the fold.

    ``carry`` = False: the words fold to 0xFFFF (checksum 0x0000); True: their
    sum is (k+1)·2**16 − 1 with k ≥ 1, so the first fold (0xFFFF + k) carries
    out again (checksum ~k). The IP identification is chosen to get there.
    """
    while True:
        t = bytearray(_template(rng))
        size = rng.randrange(64, 2000)
        t[16:18] = struct.pack("!H", size - 14)
        t[18:20] = b"\0\0"
        words = struct.unpack("!10H", t[14:34])
        rest = sum(words) - words[5]
        if not carry or rest >= 2**16:
            break
    if carry:
        ip_id = -(-(rest + 1) // 2**16) * 2**16 - 1 - rest
    else:
        while rest >> 16:
            rest = (rest & 0xFFFF) + (rest >> 16)
        ip_id = 0xFFFF - rest
    t[18:20] = struct.pack("!H", ip_id)
    t[16:18] = rng.randbytes(2)          # the builder writes the length itself
    return bytes(t), size


def requests(rng, count):
    out = []
    sizes = [64, 65, 127, 128, 1518, 9600, 65535]
    for k in range(count):
        if k % 10 >= 8:
            template, size = _edge_request(rng, carry=k % 10 == 9)
        else:
            template = _template(rng)
            size = sizes[k] if k < len(sizes) else rng.choice(
                [rng.randrange(64, 9601), rng.randrange(64, 2**16)])
        out.append({"template": template, "size": size, "n": rng.randrange(2**16),
                    "offset": rng.randrange(2**32), "flags": rng.randrange(256),
                    "tag": rng.randrange(2**TAG_BITS)})
    return out


def check_builder(reqs, *, idle=0.0, backpressure=0.0, seed=0, depth=None):
    dut = shared(HeaderBuilder, unsigned(TAG_BITS), depth=depth)
    inputs = [dict(r, template=int.from_bytes(r["template"], "little")) for r in reqs]
    run = run_stream(dut, inputs, idle=idle, backpressure=backpressure, seed=seed)
    layout = header_result_layout(unsigned(TAG_BITS))
    problems = []
    for k, (out, r) in enumerate(zip(run.outputs, reqs, strict=True)):
        got = data.Const(layout, out)
        header = int(got.header).to_bytes(64, "little")
        want = expected_header(r["template"], r["size"], r["n"], r["offset"], r["flags"])
        if header != want or int(got.tag) != r["tag"]:
            diff = [i for i in range(64) if header[i] != want[i]]
            problems.append(f"request {k} (size {r['size']}): bytes {diff} differ, "
                            f"got {header.hex()} want {want.hex()}; tag {int(got.tag)} "
                            f"want {r['tag']}")
    assert not problems, f"{len(problems)} mismatches; first:\n  " + "\n  ".join(problems[:6])
    return run, dut


@pytest.mark.parametrize("depth", [None, 2, 16])
@pytest.mark.parametrize("idle,backpressure", STALLS)
def test_random_headers(idle, backpressure, depth):
    seed = int(idle * 10) * 7 + int(backpressure * 10)
    rng = random.Random(seed)
    reqs = requests(rng, 150)
    # the checksum edges are covered: checksum 0x0000, and a fold that carries out twice
    headers = [expected_header(r["template"], r["size"], 0, 0, 0) for r in reqs]
    sums = [sum(struct.unpack("!10H", h[14:34])) - struct.unpack("!H", h[24:26])[0]
            for h in headers]
    assert any(h[24:26] == b"\0\0" for h in headers)
    assert any((t & 0xFFFF) + (t >> 16) > 0xFFFF for t in sums)
    check_builder(reqs, idle=idle, backpressure=backpressure, seed=seed, depth=depth)


def test_queued_full_rate_and_room():
    """With ``depth``, one result a cycle after the queue's latency of 4; with the output
    held, ``depth`` requests are taken and then ``i.ready`` (the queue's room) stays low."""
    rng = random.Random(98)
    reqs = requests(rng, 60)
    run, dut = check_builder(reqs, seed=98, depth=16)
    assert run.latency == dut.latency == 4
    assert run.max_ready_streak == len(reqs)
    dut = HeaderBuilder(unsigned(TAG_BITS), depth=5)

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        ctx.set(dut.i.valid, 1)
        taken = 0
        for _ in range(20):
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            taken += ready
        assert taken == 5
        assert ctx.get(dut.o.valid)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    rejected(HeaderBuilder, depth=1, match="depth")


def test_full_rate():
    rng = random.Random(99)
    reqs = requests(rng, 60)
    run, dut = check_builder(reqs, seed=99)
    assert run.latency == dut.LATENCY == 3
    assert run.max_ready_streak == len(reqs)
    assert run.cycles == len(reqs) + dut.LATENCY


def test_reset_mid_stream_leaves_no_stale_header():
    """Only the valid bits take a reset: a reset with requests in every stage leaves no
    result behind, and the requests after it come out right (the data registers keep
    stale values that nothing reads)."""
    rng = random.Random(7)
    before, after = requests(rng, 5), requests(rng, 12)
    dut = HeaderBuilder(unsigned(TAG_BITS))
    rst = Signal()
    top = Module()
    top.submodules.builder = ResetInserter(rst)(dut)
    layout = header_request_layout(unsigned(TAG_BITS))
    out = []

    def offer(ctx, r):
        ctx.set(dut.i.payload, layout.const(dict(
            r, template=int.from_bytes(r["template"], "little"))))
        ctx.set(dut.i.valid, 1)

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)                  # the pipeline fills and holds
        for r in before:
            offer(ctx, r)
            await ctx.tick()
        assert ctx.get(dut.o.valid)
        ctx.set(dut.i.valid, 0)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(dut.LATENCY + 3):         # nothing left from before the reset
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid
        for r in after:
            offer(ctx, r)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                out.append(payload)
        ctx.set(dut.i.valid, 0)
        while len(out) < len(after):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                out.append(payload)

    sim = Simulator(top)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    for got, r in zip(out, after, strict=True):
        assert int(got.header).to_bytes(64, "little") == expected_header(
            r["template"], r["size"], r["n"], r["offset"], r["flags"])
        assert int(got.tag) == r["tag"]


def test_layouts():
    req = data.Layout.cast(header_request_layout(unsigned(4)))
    assert {name: data.Layout.cast(req)[name].shape.width for name, _ in req} == {
        "template": 512, "size": 16, "n": 16, "offset": 32, "flags": 8, "tag": 4}
    res = data.Layout.cast(header_result_layout(unsigned(4)))
    assert {name: res[name].shape.width for name, _ in res} == {"header": 512, "tag": 4}


def test_tag_shapes():
    for shape in (unsigned(0), unsigned(1), data.StructLayout({"a": unsigned(3)})):
        dut = HeaderBuilder(shape)
        assert "module hb" in verilog.convert(dut, name="hb")


@pytest.mark.parametrize("bad", ["wide", 3.5, None])
def test_parameter_validation(bad):
    rejected(HeaderBuilder, bad, match="tag_shape")
