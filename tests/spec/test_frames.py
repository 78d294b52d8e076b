"""The frame format: build, parse, checksums, classification."""

import struct
from dataclasses import replace

import numpy as np
import pytest

from squeezenic_hw.spec.codecs import f32_bits
from squeezenic_hw.spec.frames import (
    BypassReason,
    Header,
    build_host_frame,
    build_wire_frame,
    classify_host_frame,
    classify_wire_frame,
    ipv4_checksum,
    parse,
)
from squeezenic_hw.spec.header import FLAG_ENCODED, FLAG_FLUSH, FLAG_STOCHASTIC

from support.lane_scenarios import GOOD_HOST_FRAME as GOOD
from support.lane_scenarios import bad_host_frames


def test_ipv4_checksum_hand_computed():
    # 4500 0073 0000 4000 4011 ---- c0a8 0001 c0a8 00c7: one's complement sum
    # 0x4500+0x0073+0x4000+0x4011+0xc0a8+0x0001+0xc0a8+0x00c7 = 0x2479c -> 0x479e, ~ = 0xb861
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert ipv4_checksum(hdr) == 0xB861
    assert ipv4_checksum(hdr[:10] + b"\xb8\x61" + hdr[12:]) == 0xB861


def test_build_parse_round_trip_and_lengths():
    h = Header(dst_mac=bytes(range(6)), src_mac=bytes(range(6, 12)), ip_tos=0x28, ip_id=777,
               ttl=9, src_ip=bytes([1, 2, 3, 4]), dst_ip=bytes([5, 6, 7, 8]), src_port=1234,
               codec=4, param=3, flags=FLAG_STOCHASTIC | FLAG_FLUSH,
               scale_bits=0x7FC01234, aux_bits=0xFF800001, seed=0xDEADBEEF, offset=2**32 - 5)
    x = np.arange(10, dtype=np.float32)
    f = build_host_frame(h, x)
    assert len(f) == 64 + 40
    p = parse(f)
    assert p == replace(h, n=10)
    assert p.ip_total_length == len(f) - 14 and p.udp_length == len(f) - 34
    assert p.udp_checksum == 0 and p.ip_checksum == ipv4_checksum(f[14:34])
    assert p.scale_bits == 0x7FC01234 and p.aux_bits == 0xFF800001  # NaN payloads kept
    assert p.stochastic and p.flush and not p.encoded
    assert np.array_equal(np.frombuffer(f[64:], "<f4"), x)
    assert f[42:46] == bytes([1, 4, 3, FLAG_STOCHASTIC | FLAG_FLUSH])
    assert struct.unpack("<H", f[46:48])[0] == 10
    w = build_wire_frame(replace(h, n=3, flags=FLAG_ENCODED), b"\x01\x02")
    assert len(w) == 66 and parse(w).ip_total_length == 52 and parse(w).udp_length == 32
    assert parse(b"\0" * 63) is None


@pytest.mark.parametrize("reason", list(bad_host_frames()))
def test_classify_host_bypass_reasons(reason):
    assert classify_host_frame(bad_host_frames()[reason])[1] is reason


def test_classify_good_and_not_built_in():
    h, reason = classify_host_frame(GOOD)
    assert reason is None and h.n == 4
    assert classify_host_frame(GOOD, codecs_built_in={0})[1] is BypassReason.CODEC
    assert classify_host_frame(GOOD, port=9)[1] is BypassReason.OTHER_PORT
    assert classify_host_frame(GOOD, tuser_size=len(GOOD) + 4)[1] is BypassReason.IP_LENGTH


def test_classify_wire_frame():
    h = Header(codec=5, n=9, flags=FLAG_ENCODED, scale_bits=f32_bits(1.0))
    w = build_wire_frame(h, b"\xff\x01")
    assert classify_wire_frame(w)[1] is None
    assert classify_wire_frame(build_wire_frame(h, b"\xff"))[1] is BypassReason.LENGTH
    assert classify_wire_frame(GOOD)[1] is BypassReason.NOT_ENCODED
    assert classify_wire_frame(w, codecs_built_in={0})[1] is BypassReason.CODEC
