# amaranth: UnusedElaboratable=no
"""HeaderFinisher: bare beats (lengths and checksum zero, tuser in the UDP length and
checksum fields, no tkeep or tuser_size) come out as the frames the reference builds
(spec.frames), under random idle cycles and backpressure."""

import random

import pytest

from squeezenic_hw.gateware.arrays.header_finisher import FINISHER_CODE_BITS, HeaderFinisher
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource
from squeezenic_hw.sim.streams import simulation_of
from squeezenic_hw.spec.frames import Header, build_wire_frame
from squeezenic_hw.spec.header import HDR, HEADER_LEN, MAX_PKT_LEN

from support.unused import rejected


def _bare(frame):
    """What a bare lane sends for ``frame``: its bytes, lengths and checksum zero,
    tuser_src and tuser_dst in the UDP length and checksum fields."""
    data = bytearray(frame.data)
    for start, n in (HDR.IP_TOTAL_LENGTH, HDR.IP_CHECKSUM):
        data[start:start + n] = bytes(n)
    data[HDR.UDP_LENGTH[0]:HDR.UDP_LENGTH[0] + 2] = frame.src.to_bytes(2, "big")
    data[HDR.UDP_CHECKSUM[0]:HDR.UDP_CHECKSUM[0] + 2] = frame.dst.to_bytes(2, "big")
    return AxisFrame(bytes(data), size=0)


def _frames(rng, count, b):
    """Frames of ``n`` codes of ``b`` bits: every payload length mod 64 and the
    largest."""
    top = min(2**16 - 1, (MAX_PKT_LEN - HEADER_LEN) * 8 // b)
    out = []
    for k in range(count):
        n = rng.choice([1, 2, 8 // b or 1, top, rng.randint(1, top),
                        rng.randint(1, 64 * 8 // b) + k % 64 * 8 // b])
        h = Header(codec=5 if b == 1 else 3, param=0 if b == 1 else b, flags=1,
                   n=n, offset=rng.getrandbits(32),
                   ip_id=rng.getrandbits(16), ip_tos=rng.getrandbits(8),
                   ttl=rng.getrandbits(8), src_port=rng.getrandbits(16),
                   scale_bits=rng.getrandbits(32), seed=rng.getrandbits(32),
                   src_ip=rng.randbytes(4), dst_ip=rng.randbytes(4))
        payload = rng.randbytes(-(-n * b // 8))
        out.append(AxisFrame(build_wire_frame(h, payload),
                             src=rng.getrandbits(16), dst=rng.getrandbits(16)))
    return out


@pytest.mark.parametrize("b", FINISHER_CODE_BITS)
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_header_finisher_completes_bare_frames(b, idle, backpressure):
    rng = random.Random(b * 10 + int(idle * 10))
    want = _frames(rng, 30, b)
    dut = HeaderFinisher(b)
    source = FrameSource(dut.i, [_bare(f) for f in want], idle=idle, seed=1)
    sink = FrameSink(dut.o, n_frames=len(want), backpressure=backpressure, seed=2,
                     timeout=100_000)
    simulation_of(dut).run([(source.run, True), (sink.run, False)])
    # (the sink checks tkeep, and tuser_size against the bytes delivered)
    assert [(f.data, f.src, f.dst) for f in sink.frames] == \
        [(f.data, f.src, f.dst) for f in want]


@pytest.mark.parametrize("bad", [0, 3, 16, True, "1"])
def test_header_finisher_code_bits_checked(bad):
    rejected(HeaderFinisher, bad, match="code_bits")
