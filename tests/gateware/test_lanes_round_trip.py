"""Every codec through both hardware lanes: tensor → host frames → TX → RX → tensor.

One TX lane and one RX lane with every codec built in carry a stream per codec
(and per rounding mode), interleaved, with bypass traffic; each lane's output
equals the reference lane's, and the gathered tensor equals the reference
codec's decode of the reference encode.
"""

import numpy as np
import pytest

from squeezenic_hw.reference import codecs as ref
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.spec.codecs import CODECS
from squeezenic_hw.spec.frames import Header, classify_host_frame, parse

from support.lane_scenarios import bad_frames, check_against_reference, host_stream, lane_simulation


def _gather(frames):
    """{(src_ip, offset) -> fp32 bits} of the decodable host frames."""
    out = {}
    for f in frames:
        h, reason = classify_host_frame(f)
        if reason is None:
            values = np.frombuffer(f, "<u4", h.n, 64)
            for i, v in enumerate(values):
                out[(h.src_ip, h.offset + i)] = int(v)
    return out


@pytest.mark.parametrize("idle,backpressure", [(0.2, 0.2)])
def test_every_codec_through_both_lanes(idle, backpressure):
    rng = np.random.default_rng(21)
    streams = []
    for k, codec in enumerate(CODECS):
        for stochastic in ([False, True] if CODECS[codec].stochastic else [False]):
            hdr = Header(src_ip=bytes([10, 1, k, int(stochastic)]))
            streams.append(host_stream(rng, codec, n_total=int(rng.integers(40, 120)),
                                       max_k=60, stochastic=stochastic, header=hdr,
                                       flush_last=True))
    bad = list(bad_frames("tx").values())
    frames = []
    while any(streams):
        s = [s for s in streams if s][int(rng.integers(sum(1 for s in streams if s)))]
        frames.append(s.pop(0))
        if rng.random() < 0.1:
            frames.append(bad[int(rng.integers(len(bad)))])
    frames = [AxisFrame(f, src=3, dst=4) for f in frames]

    tx = lane_simulation("tx").run(frames, idle=idle, backpressure=backpressure, seed=1)
    wire = check_against_reference(tx, frames, "tx")
    rx = lane_simulation("rx").run(tx.frames, idle=idle, backpressure=backpressure, seed=2)
    back = check_against_reference(rx, wire, "rx")

    # The gathered tensors equal decode(encode(x)) of the reference codecs.
    got = _gather(back)
    n_checked = 0
    for f in frames:
        h, reason = classify_host_frame(f.data)
        if reason is not None:
            continue
        x = np.frombuffer(f.data, "<f4", h.n, 64)
        codes = ref.encode(x, h.codec, param=h.param, scale=h.scale, aux=h.aux, seed=h.seed,
                           offset=h.offset, stochastic=h.stochastic)
        want = ref.to_bits(ref.decode(codes, h.codec, param=h.param, scale=h.scale,
                                      aux=h.aux))
        for i in range(h.n):
            assert got[(h.src_ip, h.offset + i)] == int(want[i])
            n_checked += 1
    assert n_checked == sum(parse(f.data).n for f in frames
                            if classify_host_frame(f.data)[1] is None)
