"""Frames for the co-simulation, built and parsed with scapy (no cocotb import here).

The SqueezeNIC header is a scapy layer written from ``docs/wire-format.md``
section 2 (not from the project's ``squeezenic_hw/spec/frames.py``), so the frames the tests send
and the checks of what comes out are an independent reading of the spec. What
the hardware must send is still the project's numpy reference
(``squeezenic_hw.reference.lane``, ``squeezenic_hw.reference.array``): the tests compare bytes.

Also imported by ``amaranth_speed.py`` (the same traffic in Amaranth's simulator).
"""

import math
import random
import struct
from dataclasses import dataclass, field

import numpy as np
from scapy.fields import ByteField, FlagsField, LEIntField, LEShortField
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Padding, Raw

__all__ = ["SqueezeNic", "CODECS", "bits_per_element", "Stream", "make_streams",
           "interleave", "tx_bypass_frames", "rx_bypass_frames", "inspect", "tuser",
           "untuser", "expected_src", "f32_bits", "host_traffic", "TUSER_DST_TX",
           "TUSER_DST_C2H", "HEADER_LEN", "STREAM_TRAFFIC", "STREAM_TRAFFIC_FEW_CODECS",
           "capacity", "wire_traffic", "stream_test_traffic"]

HEADER_LEN = 64
#: Size of the stream tests' traffic: every codec, few elements (Icarus simulates the
#: all-codecs plugin at about 10 busy cycles a second) ...
STREAM_TRAFFIC = {"elements": (60, 200), "max_frame": 60}
#: ... and for builds of one or two codecs, which it simulates 20 times faster
STREAM_TRAFFIC_FEW_CODECS = {"elements": (400, 1200), "max_frame": 200}
#: tuser_dst of interface 0's frames: the adapter's port bit (6 + i), PCIe function i.
TUSER_DST_TX = 1 << 6
TUSER_DST_C2H = 1 << 0

#: Section 4 of the spec: name -> (id, bits per element or None (= param), param range,
#: stochastic rounding allowed)
CODECS = {
    "raw": (0, 32, None, False),
    "fp16": (1, 16, None, False),
    "bf16": (2, 16, None, False),
    "fixed": (3, None, (2, 16), True),
    "qsgd": (4, None, (2, 16), True),
    "sign": (5, 1, None, False),
    "natural": (6, 9, None, True),
}
_NAMES = {v[0]: k for k, v in CODECS.items()}


def bits_per_element(codec, param):
    bits = CODECS[_NAMES[codec] if isinstance(codec, int) else codec][1]
    return param if bits is None else bits


class SqueezeNic(Packet):
    """The SqueezeNIC header (bytes 42-63 of a frame; fields little-endian)."""
    name = "SqueezeNIC"
    fields_desc = [
        ByteField("version", 1),
        ByteField("codec", 0),
        ByteField("param", 0),
        FlagsField("flags", 0, 8, ["encoded", "stochastic", "flush", "r3", "r4", "r5", "r6",
                                   "r7"]),
        LEShortField("n", 0),
        LEIntField("scale", 0x3F800000),
        LEIntField("aux", 0x3F800000),
        LEIntField("seed", 0),
        LEIntField("offset", 0),
    ]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def tuser(size, src, dst):
    """The wrapper's ``<stream>_tuser``: {dst, src, size}."""
    return (size & 0xFFFF) | (src & 0xFFFF) << 16 | (dst & 0xFFFF) << 32


def untuser(value):
    return value & 0xFFFF, (value >> 16) & 0xFFFF, (value >> 32) & 0xFFFF


# ---- host streams ---------------------------------------------------------------------

@dataclass
class Stream:
    """One tensor of one codec, cut into host frames of random lengths."""
    codec: str
    values: np.ndarray
    index: int                    # distinct addresses per stream (coalescing keys differ)
    port: int
    param: int = 0
    stochastic: bool = False
    scale: float = 1.0
    aux: float = 1.0
    seed: int = 0
    offset: int = 0
    udp_checksum: bool = False    # let scapy compute it (the lanes ignore it)
    frames: list = field(default_factory=list)   # (bytes, tuser_src)


def _values(rng, n):
    """Gradient-like fp32 values with a sprinkle of edge cases (NaN, inf, -0, subnormals)."""
    x = (rng.standard_normal(n) * rng.uniform(0.01, 20)).astype(np.float32)
    edges = np.array([0x7FC00000, 0xFF800000, 0x7F800000, 0x80000000, 0x00000001,
                      0x807FFFFF, 0x7F7FFFFF, 0x00800000], dtype=np.uint32).view(np.float32)
    pick = rng.random(n) < 0.05
    x[pick] = edges[rng.integers(0, len(edges), int(pick.sum()))]
    return x


def _host_frame(s, values, offset, flush, ip_id):
    eth = Ether(src=f"02:00:00:00:01:{s.index:02x}", dst="02:00:00:00:02:01")
    ip = IP(src=f"10.1.0.{1 + s.index}", dst="10.2.0.1", id=ip_id, flags="DF", ttl=64)
    udp = UDP(sport=40000 + s.index, dport=s.port, chksum=None if s.udp_checksum else 0)
    flags = (["stochastic"] if s.stochastic else []) + (["flush"] if flush else [])
    hdr = SqueezeNic(codec=CODECS[s.codec][0], param=s.param, flags="+".join(flags),
                     n=len(values), scale=f32_bits(s.scale), aux=f32_bits(s.aux),
                     seed=s.seed, offset=offset % 2**32)
    return bytes(eth / ip / udp / hdr / Raw(values.astype("<f4").tobytes()))


def make_streams(rng, codecs, *, port, elements=(300, 800), max_frame=150, flush_rate=0.05,
                 first_index=0, totals=None, params=None):
    """One stream per codec; frames of 1…``max_frame`` elements with random tuser_src."""
    streams = []
    for k, codec in enumerate(codecs):
        _, _, prange, stoch = CODECS[codec]
        n = int(totals[k]) if totals else int(rng.integers(*elements))
        x = _values(rng, n)
        finite = np.abs(x[np.isfinite(x)])
        m = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        s = Stream(codec=codec, values=x, index=first_index + k, port=port,
                   param=(params or {}).get(codec) or (
                       int(rng.integers(prange[0], prange[1] + 1)) if prange else 0),
                   stochastic=bool(stoch and rng.random() < 0.5),
                   seed=int(rng.integers(0, 2**32)), offset=int(rng.integers(0, 2**32)),
                   udp_checksum=bool(k % 2))
        if codec in ("fixed", "qsgd"):
            s.scale, s.aux = 100.0 / m, m / 100.0
        elif codec == "sign":
            s.scale, s.aux = float(rng.uniform(0.1, 2)), -float(rng.uniform(0.1, 2))
        else:
            s.scale, s.aux = float(rng.uniform(0.5, 2)), float(rng.uniform(-1, 1))
        pos, ip_id = 0, int(rng.integers(0, 2**16))
        while pos < n:
            k_el = min(int(rng.integers(1, max_frame + 1)), n - pos)
            flush = rng.random() < flush_rate
            s.frames.append((_host_frame(s, x[pos:pos + k_el], s.offset + pos, flush,
                                         (ip_id + len(s.frames)) % 2**16),
                             int(rng.integers(0, 2**16))))
            pos += k_el
        streams.append(s)
    return streams


def interleave(rng, streams, bypass, *, bypass_rate=0.15):
    """Frames of the streams in runs of 1–4 (so wire frames coalesce and also close on
    mismatch), with the bypass frames sprinkled in; returns [(bytes, tuser_src)]."""
    queues = [list(s.frames) for s in streams]
    extra = list(bypass)
    out = []
    while any(queues) or extra:
        if extra and (not any(queues) or rng.random() < bypass_rate):
            out.append(extra.pop(0))
            continue
        live = [q for q in queues if q]
        q = live[int(rng.integers(len(live)))]
        for _ in range(int(rng.integers(1, 5))):
            if q:
                out.append(q.pop(0))
    return out


def capacity(codec, param, mtu):
    """Most elements a wire frame of ``mtu`` bytes carries (section 6: the frame is full)."""
    return min(2**16 - 1, (mtu - HEADER_LEN) * 8 // bits_per_element(codec, param))


def host_traffic(seed, codecs, *, port, mtu, elements=(300, 800), max_frame=150):
    """The TX traffic of one run: [(bytes, tuser_src)]: one stream per codec, interleaved
    with every kind of bypass frame, then a stream of the codec with the fewest elements
    per wire frame, long enough to fill one (``close_full``)."""
    rng = np.random.default_rng(seed)
    streams = make_streams(rng, codecs, port=port, elements=elements, max_frame=max_frame)
    bypass = [(f, int(rng.integers(0, 2**16))) for f in tx_bypass_frames(port)]
    rng.shuffle(bypass)
    frames = interleave(rng, streams, bypass)
    params = {"fixed": 16, "qsgd": 16}
    fill = min(codecs, key=lambda c: capacity(c, params.get(c, 0), mtu))
    n = capacity(fill, params.get(fill, 0), mtu) * 5 // 4
    if n <= 1500:       # not for a build of only sign (11632 elements per wire frame)
        frames += make_streams(rng, [fill], port=port, max_frame=max_frame, flush_rate=0.0,
                               first_index=len(codecs), totals=[n], params=params)[0].frames
    return frames


def wire_traffic(seed, codecs, *, port, mtu, tx_reference, max_host_elements,
                 elements=(300, 800), max_frame=150):
    """The RX traffic of one run: the reference TX's wire frames of fresh host traffic
    (random tuser_src), with every kind of RX bypass frame interleaved; one stream of the
    codec with the most elements per wire frame is long enough that RX splits it into
    two host frames."""
    rng = np.random.default_rng(seed)
    streams = make_streams(rng, codecs, port=port, elements=elements, max_frame=max_frame)
    wide = max(codecs, key=lambda c: capacity(c, 2, mtu))
    streams += make_streams(rng, [wide], port=port, max_frame=max_frame, flush_rate=0.0,
                            first_index=len(codecs), totals=[max_host_elements + 40],
                            params={"fixed": 2, "qsgd": 2})
    wire = tx_reference([f for s in streams for f, _ in s.frames])
    frames = [(f, int(rng.integers(0, 2**16))) for f in wire]
    for f in rx_bypass_frames(port):
        frames.insert(int(rng.integers(0, len(frames) + 1)), (f, int(rng.integers(0, 2**16))))
    return frames


def stream_test_traffic(seed, codecs, *, port, mtu, max_host_elements, tx_reference):
    """``(tx_in, rx_in)`` of one stream test: one stream per codec, small (the all-codecs
    build is slow in Icarus); builds of one or two codecs get three larger streams per
    codec."""
    few = len(codecs) <= 2
    size = STREAM_TRAFFIC_FEW_CODECS if few else STREAM_TRAFFIC
    streams = list(codecs) * 3 if few else list(codecs)
    tx_in = host_traffic(seed, streams, port=port, mtu=mtu, **size)
    rx_in = wire_traffic(seed + 1000, streams, port=port, mtu=mtu, tx_reference=tx_reference,
                         max_host_elements=max_host_elements, **size)
    return tx_in, rx_in


# ---- frames that must pass through unchanged -------------------------------------------

def _sqz(port, encoded, *, ip=None, udp=None, payload=None, flags=0, **hdr):
    """A small fp16 SqueezeNIC frame (host frame, or wire frame when ``encoded``)."""
    hdr.setdefault("codec", 1)
    hdr.setdefault("n", 5)
    if payload is None:
        payload = bytes(range(10)) if encoded else np.arange(5, dtype="<f4").tobytes()
    return bytes(Ether(src="02:00:00:00:01:f0", dst="02:00:00:00:02:01")
                 / (ip or IP(src="10.1.0.250", dst="10.2.0.1", flags="DF"))
                 / (udp or UDP(sport=40250, dport=port, chksum=0))
                 / SqueezeNic(flags=flags | int(encoded), **hdr) / Raw(payload))


def _common_bypass(port, encoded):
    arp = Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:01:f1") / ARP(
        op="who-has", psrc="10.1.0.1", pdst="10.2.0.1")
    e = encoded
    return [
        bytes(arp / Padding(load=bytes(60 - len(arp)))),                           # short
        bytes(Ether(src="02:00:00:00:01:f2", dst="02:00:00:00:02:01")
              / IPv6(src="fd00::1", dst="fd00::2") / UDP(sport=1, dport=port)
              / Raw(bytes(80))),                                                     # IPv6
        _sqz(port, e, ip=IP(src="10.1.0.250", dst="10.2.0.1",
                            options=[IPOption_NOP()] * 4)),                          # options
        _sqz(port, e, ip=IP(src="10.1.0.250", dst="10.2.0.1", flags="MF")),        # fragment
        bytes(Ether(src="02:00:00:00:01:f3", dst="02:00:00:00:02:01")
              / IP(src="10.1.0.251", dst="10.2.0.1") / TCP(sport=5, dport=port)
              / Raw(bytes(range(60)))),                                              # TCP
        bytes(Ether(src="02:00:00:00:01:f4", dst="02:00:00:00:02:01")
              / IP(src="10.1.0.252", dst="10.2.0.1") / UDP(sport=5353, dport=53)
              / Raw(bytes(range(100)))),                                             # DNS
        _sqz(port, e, ip=IP(src="10.1.0.250", dst="10.2.0.1", chksum=0xBEEF)),     # IP csum
        _sqz(port, e, ip=IP(src="10.1.0.250", dst="10.2.0.1", len=50)),            # IP len
        _sqz(port, e, udp=UDP(sport=40250, dport=port, len=20, chksum=0)),        # UDP len
        _sqz(port, e, version=2),
        _sqz(port, e, flags=0x10),                                                # reserved
        _sqz(port, e, codec=7),                                                   # not built
        _sqz(port, e, codec=3, param=1),                                          # bad param
        _sqz(port, e, n=0, payload=b""),                                          # n = 0
        _sqz(port, e, n=9),                                                       # length
    ]


def tx_bypass_frames(port):
    """Host frames the TX lane must pass through: one per bypass reason, and more."""
    return _common_bypass(port, False) + [_sqz(port, True)]                    # encoded


def rx_bypass_frames(port):
    """Wire frames the RX lane must pass through: one per bypass reason, and more."""
    return _common_bypass(port, True) + [_sqz(port, False)]                    # not encoded


# ---- looking at what came out ----------------------------------------------------------

def inspect(frame, *, port, encoded):
    """Parse an output frame with scapy; for a SqueezeNIC frame check what section 2 says
    a frame the hardware writes looks like. Returns the SqueezeNIC layer or ``None``."""
    pkt = Ether(frame)
    if IP not in pkt or UDP not in pkt or pkt[UDP].dport != port or len(frame) < HEADER_LEN:
        return None
    hdr = SqueezeNic(bytes(pkt[UDP].payload)[:HEADER_LEN - 42])
    if bool(hdr.flags.encoded) != encoded:
        return None
    ip = pkt[IP]
    fresh = IP(bytes(ip))
    fresh.chksum = None
    assert ip.chksum == IP(bytes(fresh)).chksum, "IPv4 header checksum"
    assert ip.len == len(frame) - 14 and pkt[UDP].len == len(frame) - 34, "lengths"
    assert pkt[UDP].chksum == 0, "UDP checksum of a frame the hardware wrote"
    assert hdr.version == 1 and int(hdr.flags) & 0xF8 == 0 and hdr.n >= 1
    payload = len(frame) - HEADER_LEN
    want = math.ceil(hdr.n * bits_per_element(hdr.codec, hdr.param) / 8) if encoded \
        else 4 * hdr.n
    assert payload == want, f"payload {payload} bytes for n = {hdr.n}"
    return hdr


def expected_src(inputs, outputs, processed):
    """tuser_src each output must carry (docs/lanes.md): a bypassed frame keeps its own,
    a built frame takes that of the input frame holding its first element (streams have
    distinct source IPs). ``inputs``: [(bytes, src)]; ``outputs``: [bytes];
    ``processed(bytes)``: whether the lane encodes/decodes that input.

    Returns ``(srcs, built)``: the tuser_src of each output and whether the lane built it.
    """
    spans, bypassed = [], []
    for data, src in inputs:
        if processed(data):
            h = SqueezeNic(data[42:HEADER_LEN])
            spans.append((Ether(data)[IP].src, h.offset, h.n, src))
        else:
            bypassed.append((data, src))
    want, built, k = [], [], 0
    for out in outputs:
        built.append(not (k < len(bypassed) and bypassed[k][0] == out))
        if not built[-1]:
            want.append(bypassed[k][1])
            k += 1
            continue
        h = SqueezeNic(out[42:HEADER_LEN])
        ip_src = Ether(out)[IP].src
        owner = [src for a, off, n, src in spans
                 if a == ip_src and (h.offset - off) % 2**32 < n]
        assert owner, f"no input frame holds element {h.offset} of {ip_src}"
        want.append(owner[0])
    assert k == len(bypassed), "a bypassed frame is missing from the output"
    return want, built


def random_bits(seed, p, n=997):
    """A list of ``n`` seeded random booleans, true with probability ``p`` (for pauses)."""
    r = random.Random(seed)
    return [r.random() < p for _ in range(n)]


__all__ += ["random_bits"]
