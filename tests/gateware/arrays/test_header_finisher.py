# amaranth: UnusedElaboratable=no
"""HeaderFinisher: headers with the lengths and checksum zeroed come out as built by
the reference (spec.frames), under random idle cycles and backpressure."""

import random

import pytest
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.header_finisher import HeaderFinisher
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource
from squeezenic_hw.spec.frames import Header, build_wire_frame
from squeezenic_hw.spec.header import HDR


def _zeroed(frame):
    data = bytearray(frame)
    for start, n in (HDR.IP_TOTAL_LENGTH, HDR.IP_CHECKSUM, HDR.UDP_LENGTH):
        data[start:start + n] = bytes(n)
    return bytes(data)


def _frames(rng, count):
    out = []
    for _ in range(count):
        n_bytes = rng.choice([1, 63, 64, 65, 200, rng.randint(1, 9536)])
        h = Header(codec=rng.choice([3, 5]), param=rng.choice([2, 4, 8]),
                   n=rng.randint(1, 65535), offset=rng.getrandbits(32),
                   ip_id=rng.getrandbits(16), ip_tos=rng.getrandbits(8),
                   ttl=rng.getrandbits(8), src_port=rng.getrandbits(16),
                   scale_bits=rng.getrandbits(32), seed=rng.getrandbits(32),
                   src_ip=rng.randbytes(4), dst_ip=rng.randbytes(4))
        out.append(AxisFrame(build_wire_frame(h, rng.randbytes(n_bytes)),
                             src=rng.getrandbits(16), dst=rng.getrandbits(16)))
    return out


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_header_finisher_fills_lengths_and_checksum(idle, backpressure):
    rng = random.Random(int(idle * 10))
    want = _frames(rng, 40)
    sent = [AxisFrame(_zeroed(f.data), src=f.src, dst=f.dst) for f in want]
    assert all(s.data != w.data for s, w in zip(sent, want, strict=True))
    dut = HeaderFinisher()
    source = FrameSource(dut.i, sent, idle=idle, seed=1)
    sink = FrameSink(dut.o, n_frames=len(sent), backpressure=backpressure, seed=2,
                     timeout=100_000)
    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(source.run, background=True)
    sim.add_testbench(sink.run)
    sim.run()
    assert [(f.data, f.src, f.dst) for f in sink.frames] == \
        [(f.data, f.src, f.dst) for f in want]
