# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.tx.close_sizer.TxCloseSizer`, the TX controller's
stage that writes one header request per output frame, on its own.

A Python model of the coalescer's decisions (wire frames of a capacity in elements, host
frames of one codec each, with and without flush; a host frame of another codec, or one
that does not continue the tensor, closes the open frame; idle closes; bypassed frames,
some after an idle close) gives both the records the sizer reads — only those of the beats
that open or close a frame, as the coalescer sends them — and the requests it must write:
for each wire frame the header of the host frame that holds its first element, that
frame's ``tuser``, the tensor index of its first element, ``n``, the flush flag and the
length of wire format sections 2–4 (``64 + ⌈n·b/8⌉``; for ``threshold``
``64 + 4k + min(⌈n/8⌉, 2k)`` and the layout in the header's ``param``); for a bypassed
frame a token of its length at its place in the order. The records go in under random idle
cycles and backpressure and every request is compared field for field."""

import random

import pytest

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.tx.close_sizer import TxCloseSizer
from squeezenic_hw.gateware.tx.coalescer import RecordKind, close_record_layout
from squeezenic_hw.sim.streams import run_stream, unpack_fields
from squeezenic_hw.spec.header import FLAG_ENCODED, FLAG_FLUSH, FLAG_STOCHASTIC, HDR, HEADER_LEN

from support.shared_duts import shared
from support.unused import rejected

SETTINGS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]


def _below(v):
    return (1 << v) - 1


def _popcount(x):
    return bin(x).count("1")


def _header_byte(hdr, field):
    return hdr >> (8 * field[0]) & 0xFF


class Coalescer:
    """The records of a random run of host frames and bypassed frames, and the requests
    the sizer must write for them."""

    def __init__(self, rng, *, sparse=True, width=None, keep=None):
        self.rng, self.sparse, self.width = rng, sparse, width
        # threshold: the kept elements of a host frame's beat ``b`` of ``v`` elements
        self.keep = keep or self._random_keep
        self.density = 0.5
        self.records, self.requests = [], []
        self.open = None           # the open frame: header, src, dst, offset, n, k, room, key
        self.latest = None         # the latest host header, with its tuser

    def _record(self, kind, **fields):
        rng = self.rng
        rec = {"close_only": 1, "v": 0, "room_big": rng.getrandbits(1),
               "room_low": rng.randrange(17), "fit": 0, "keep": rng.getrandbits(16),
               "flush_end": 0, "sparse": 0, "n_before": 0, "k_before": 0,
               "offset": rng.getrandbits(32), "width": rng.randrange(1, 33),
               "kind": kind, "hdr": rng.getrandbits(512), "src": rng.getrandbits(16),
               "dst": rng.getrandbits(16), "size": rng.getrandbits(16), "mismatch": 0,
               "opens": 0}
        if self.open is not None:
            f = self.open
            rec.update(n_before=f["n"], k_before=f["k"], sparse=f["key"][1],
                       width=f["key"][0])
        rec.update(fields)
        self.records.append(rec)

    def _close(self, flush, *, n=None, k=None, offset=None):
        """The request for the open frame (``n``, ``k``, ``offset``: of a frame that a
        beat both opened and closed)."""
        f = self.open
        n, k = (f["n"] if n is None else n), (f["k"] if k is None else k)
        offset = f["offset"] if offset is None else offset
        width, sparse = f["key"]
        hdr = f["hdr"]
        if sparse:
            index = 16 * k < n
            size = HEADER_LEN + 4 * k + (2 * k if index else (n + 7) // 8)
            p0, _ = HDR.PARAM
            hdr = hdr & ~(0xFF << 8 * p0) | int(index) << 8 * p0
        else:
            size = HEADER_LEN + (n * width + 7) // 8
        stochastic = _header_byte(f["hdr"], HDR.FLAGS) & FLAG_STOCHASTIC
        self.requests.append({
            "template": hdr, "size": size, "n": n, "offset": offset % 2**32,
            "flags": FLAG_ENCODED | stochastic | (FLAG_FLUSH if flush else 0),
            "tag": {"built": 1, "size": size, "src": f["src"], "dst": f["dst"]}})
        self.open = None

    def _fresh(self, offset, key):
        hdr, src, dst = self.latest
        return {"hdr": hdr, "src": src, "dst": dst, "offset": offset, "n": 0, "k": 0,
                "room": self.capacity, "key": key}

    def host_frame(self, n_elements, flush, key, continues):
        rng = self.rng
        hdr, src, dst = rng.getrandbits(512), rng.getrandbits(16), rng.getrandbits(16)
        mismatch = self.open is not None and (self.open["key"] != key or not continues)
        if mismatch:
            self._record(RecordKind.HEADER, mismatch=1, hdr=hdr, src=src, dst=dst)
            self._close(False)
        else:
            self._record(RecordKind.HEADER, hdr=hdr, src=src, dst=dst)
        self.latest = (hdr, src, dst)
        offset = rng.getrandbits(32)
        if self.open is not None:      # continues the tensor where the open frame ends
            offset = self.open["offset"] + self.open["n"]
        width, sparse = key
        self.density = rng.choice([0.0, 0.02, 0.06, 0.5, 1.0])
        for b in range(0, n_elements, ELEMENTS_PER_BEAT):
            v = min(ELEMENTS_PER_BEAT, n_elements - b)
            self.beat(v, flush and b + v == n_elements, (offset + b) % 2**32, key,
                      b // ELEMENTS_PER_BEAT)

    def _random_keep(self, v, b):
        return sum(1 << e for e in range(v) if self.rng.random() < self.density)

    def beat(self, v, flush_end, offset, key, b=0):
        rng = self.rng
        width, sparse = key
        opens = self.open is None
        if opens:
            self.open = self._fresh(offset, key)
        f = self.open
        keep = self.keep(v, b) if sparse else rng.getrandbits(16)
        room = f["room"]
        fields = {"close_only": 0, "v": v, "flush_end": int(flush_end), "sparse": int(sparse),
                  "n_before": f["n"], "k_before": f["k"], "offset": offset, "width": width,
                  "keep": keep, "opens": int(opens),
                  "room_big": int(room > ELEMENTS_PER_BEAT),
                  "room_low": room if room <= ELEMENTS_PER_BEAT else rng.randrange(17)}
        if sparse:
            take = min(v, room)
            fields["fit"] = _below(take)
            straddle = take < v
            exact = False
        else:
            take = min(v, room)
            straddle = v > room
            exact = v == room
        close1 = straddle or exact or flush_end
        if opens or close1:
            self._record(RecordKind.BEAT, **fields)
        kept = keep & _below(v) if sparse else 0
        prefix, suffix = _popcount(kept & _below(take)), _popcount(kept & ~_below(take))
        if not close1:
            f.update(n=f["n"] + v, k=f["k"] + prefix, room=room - v)
            return
        self._close(flush_end and not straddle, n=f["n"] + take, k=f["k"] + prefix)
        if straddle:
            rest = v - take
            self.open = self._fresh(offset + take, key)
            self.open.update(n=rest, k=suffix, room=self.capacity - rest)
            if flush_end:
                self._close(True)

    def idle_close(self):
        if self.open is not None:
            self._record(RecordKind.CLOSE)
            self._close(False)

    def bypass(self, after_idle):
        size = self.rng.randint(1, 9600)
        if after_idle and self.open is not None:
            self._record(RecordKind.BYPASS, mismatch=1, size=size)
            self._close(False)
        else:
            self._record(RecordKind.BYPASS, size=size)
        self.requests.append({"size": size, "tag": {"built": 0, "size": size}})

    def run(self, events):
        rng = self.rng
        self.capacity = rng.choice([16, 17, 40, 100, 2000])
        key = None
        for _ in range(events):
            r = rng.random()
            if r < 0.15:
                self.bypass(after_idle=rng.random() < 0.5)
            elif r < 0.22:
                self.idle_close()
            else:
                if key is None or rng.random() < 0.3:
                    sparse = self.sparse and rng.random() < 0.5
                    width = 32 if sparse else self.width or rng.randrange(1, 33)
                    key = (width, sparse)
                n = rng.choice([1, 15, 16, 17, 32, rng.randint(1, 120)])
                self.host_frame(n, rng.random() < 0.3, key, rng.random() < 0.8)
            if rng.random() < 0.05:
                self.capacity = rng.choice([16, 17, 40, 100, 2000])
        self.idle_close()
        return self


def check(model, *, width=None, sparse=True, idle=0.0, backpressure=0.0, seed=0):
    dut = shared(TxCloseSizer, width=width, sparse=sparse)
    layout = dut.o.payload.shape()
    run = run_stream(dut, model.records, n_outputs=len(model.requests), idle=idle,
                     backpressure=backpressure, seed=seed)
    assert len(run.outputs) == len(model.requests)
    for j, (value, want) in enumerate(zip(run.outputs, model.requests, strict=True)):
        req = unpack_fields(layout, value)
        got = {name: ({k: int(req[name][k]) for k in w} if isinstance(w, dict)
                      else int(req[name]))
               for name, w in want.items()}
        assert got == want, f"request {j}: got {got}, want {want}"
    return run


@pytest.mark.parametrize("idle, backpressure", SETTINGS)
@pytest.mark.parametrize("seed", [1, 2])
def test_requests_match_the_model(seed, idle, backpressure):
    seed = seed * 10 + SETTINGS.index((idle, backpressure))
    model = Coalescer(random.Random(seed)).run(150)
    check(model, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("idle, backpressure", SETTINGS)
def test_one_width_without_threshold(idle, backpressure):
    """``width`` a constant and no ``threshold``: ``n·b`` a constant product."""
    seed = 50 + SETTINGS.index((idle, backpressure))
    model = Coalescer(random.Random(seed), sparse=False, width=5).run(150)
    check(model, width=5, sparse=False, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("kept", ["none", "first beat", "each beat"])
def test_threshold_layout_at_the_tie(kept):
    """Threshold frames of ``n`` elements around multiples of 16 with no kept element, one
    (``16k`` just below, at and above ``n``) or one per beat (``16k`` at ``n``): the index
    list only when strictly shorter than the bitmap."""
    rules = {"none": lambda v, b: 0, "first beat": lambda v, b: int(b == 0),
             "each beat": lambda v, b: 1}
    model = Coalescer(random.Random(8), keep=rules[kept])
    model.capacity = 2000
    for n in (1, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 200):
        model.host_frame(n, True, (32, True), False)
    check(model, idle=0.2, backpressure=0.3, seed=8)
    layouts = {int(r["template"] >> 8 * HDR.PARAM[0] & 1) for r in model.requests}
    assert layouts == ({1} if kept == "none" else {0, 1} if kept == "first beat" else {0})


def test_full_rate_and_latency():
    """No idle, no backpressure: a request ``LATENCY`` cycles after the record that closes
    its frame, and none waits on another when each record gives one."""
    rng = random.Random(7)
    model = Coalescer(rng)
    model.capacity = 16
    # a host frame's header, then beats that each fill a frame exactly: one request each
    model.host_frame(16 * 60, False, (8, False), True)
    run = check(model)
    assert run.latency == 1 + TxCloseSizer.LATENCY      # the header's record goes first
    assert run.max_ready_streak == len(run.outputs) == 60


def test_input_is_the_coalescers_close_record():
    assert TxCloseSizer().i.payload.shape() == close_record_layout()


@pytest.mark.parametrize("bad", [0, 33, True, 8.0])
def test_rejects_bad_width(bad):
    rejected(TxCloseSizer, width=bad, match="width")
