"""Shared machinery for the bit-exact tests of codec encoder/decoder units.

:func:`check_unit` cuts frames into beats (partial last beats with their
``valid`` mask, garbage in the invalid lanes, a random ``offset`` per frame and
a random ``meta`` per beat), runs the unit through
:func:`squeezenic_hw.sim.streams.run_stream`, and compares every output beat
with the numpy reference (:mod:`squeezenic_hw.reference.codecs`) bit for bit:
valid elements equal the reference, invalid elements are zero, ``valid`` and
``meta`` pass through. Mismatches are listed (the first few) in the assertion.

Frames are given as uint32 arrays: fp32 bit patterns for encoders, codes for
decoders. Frame parameters are dicts with the keys of ``CodecParams``
(``param``, ``stochastic``, ``scale``, ``aux``, ``seed``), where ``scale`` and
``aux`` are fp32 *bit patterns* (ints), so NaN payloads reach both the
hardware and the reference unchanged.
"""

import numpy as np
from amaranth import Shape, unsigned
from amaranth.lib import data

from squeezenic_hw.gateware.codecs.unit import EncoderUnit
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.sim.streams import run_stream

from support.shared_duts import shared

__all__ = [
    "META_BITS", "ONE_BITS", "f32", "frame_params", "reference_outputs",
    "check_unit", "assert_full_rate",
]

#: Width of the random ``meta`` riding with each beat.
META_BITS = 7
#: fp32 bits of 1.0 (the default ``scale``/``aux``).
ONE_BITS = 0x3F800000

_DEFAULT_PARAMS = {"param": 0, "stochastic": 0, "scale": ONE_BITS, "aux": ONE_BITS, "seed": 0}


def f32(bits):
    """The np.float32 scalar with these bits (NaN payloads kept)."""
    return np.array(int(bits) & 0xFFFFFFFF, dtype=np.uint32).view(np.float32)[()]


def frame_params(params=None, **overrides):
    """Complete a parameter dict with the defaults (scale = aux = 1.0, the rest 0)."""
    p = dict(_DEFAULT_PARAMS)
    p.update(params or {})
    p.update(overrides)
    return p


def reference_outputs(codec, encoder, values, params, offset):
    """Expected outputs of one frame from the numpy reference, as a uint32 array.

    ``encoder``: codes of the fp32 bit patterns ``values``; else the fp32 bits
    that the codes ``values`` decode to.
    """
    from squeezenic_hw.reference import codecs as ref

    values = np.asarray(values, dtype=np.uint32)
    kwargs = dict(param=params["param"], scale=f32(params["scale"]), aux=f32(params["aux"]))
    if encoder:
        out = ref.encode(ref.from_bits(values), codec, seed=params["seed"], offset=offset,
                         stochastic=bool(params["stochastic"]), **kwargs)
        return np.asarray(out, dtype=np.uint32)
    return np.asarray(ref.to_bits(ref.decode(values, codec, **kwargs)), dtype=np.uint32)


def _width(shape):
    return Shape.cast(shape).width


def _array_field(layout, name):
    f = layout[name]
    return f.offset, _width(f.shape.elem_shape)


def _scalar_field(layout, *path):
    offset, shape = 0, layout
    for name in path:
        f = data.Layout.cast(shape)[name]
        offset += f.offset
        shape = f.shape
    return offset, _width(shape)


def _show(params):
    return ", ".join(f"{k} {v:#x}" if k in ("scale", "aux", "seed") else f"{k} {v}"
                     for k, v in params.items())


def _put(word, offset, width, value):
    return word | ((int(value) & ((1 << width) - 1)) << offset)


def _get(word, offset, width):
    return (word >> offset) & ((1 << width) - 1)


def check_unit(dut_factory, codec, frames, params=None, *, idle=0.0, backpressure=0.0,
               seed=0, offsets=None, expect=None, max_report=12):
    """Run a codec unit on ``frames`` and compare it with the reference bit for bit.

    Parameters
    ----------
    dut_factory : callable
        Builds the unit; called as ``dut_factory(meta_shape=unsigned(META_BITS))``
        (the unit classes themselves qualify).
    codec : str or int
        Codec name or id, as the reference takes it.
    frames : list of array-like
        One uint32 array per frame: fp32 bits (encoders) or codes (decoders).
    params : dict or list of dicts, optional
        Frame parameters (see the module docstring); one for all frames or one
        per frame. Missing keys take the defaults of :func:`frame_params`.
    idle, backpressure, seed :
        Passed to ``run_stream``; ``seed`` also draws the offsets, ``meta`` and
        the garbage in invalid lanes.
    offsets : list of int, optional
        Tensor index of each frame's first element (default: random, such that
        the frame does not wrap past 2**32).
    expect : callable, optional
        ``expect(values, params, offset) -> uint32 array`` replacing the
        reference (for checking against an independent model).

    Returns
    -------
    (StreamRun, dut, n_beats)
    """
    rng = np.random.default_rng([seed, 0x5EED])
    dut = shared(dut_factory, meta_shape=unsigned(META_BITS))
    encoder = isinstance(dut, EncoderUnit)
    in_field, out_field = ("elements", "codes") if encoder else ("codes", "elements")
    in_layout = dut.i.payload.shape()
    out_layout = dut.o.payload.shape()
    in_off, in_w = _array_field(in_layout, in_field)
    out_off, out_w = _array_field(out_layout, out_field)
    in_valid = _scalar_field(in_layout, "valid")
    in_meta = _scalar_field(in_layout, "meta")
    out_valid = _scalar_field(out_layout, "valid")
    out_meta = _scalar_field(out_layout, "meta")
    param_fields = {k: _scalar_field(in_layout, "params", k) for k in _DEFAULT_PARAMS}
    in_offset = _scalar_field(in_layout, "offset") if encoder else None

    frames = [np.asarray(f, dtype=np.uint64).astype(np.uint32) for f in frames]
    if params is None or isinstance(params, dict):
        params = [params] * len(frames)
    if len(params) != len(frames):
        raise ValueError(f"{len(params)} parameter sets for {len(frames)} frames")
    params = [frame_params(p) for p in params]
    if offsets is None:
        offsets = [int(rng.integers(0, 2**32 - len(f) + 1)) for f in frames]

    beats = []       # (packed input, expected data list, mask, meta, where) per beat
    for k, (values, p, offset) in enumerate(zip(frames, params, offsets, strict=True)):
        if len(values) == 0:
            raise ValueError(f"frame {k} is empty")
        if expect is not None:
            expected = np.asarray(expect(values, p, offset), dtype=np.uint64)
        else:
            expected = reference_outputs(codec, encoder, values, p, offset).astype(np.uint64)
        if expected.shape != values.shape:
            raise AssertionError(f"frame {k}: reference gave {expected.shape} outputs "
                                 f"for {values.shape} inputs")
        for start in range(0, len(values), ELEMENTS_PER_BEAT):
            chunk = values[start:start + ELEMENTS_PER_BEAT]
            n = len(chunk)
            mask = (1 << n) - 1
            meta = int(rng.integers(0, 2**META_BITS))
            # Invalid lanes carry garbage: the unit must still give zero codes there.
            lanes = [int(v) for v in chunk] + [
                int(v) for v in rng.integers(0, 2**in_w, size=ELEMENTS_PER_BEAT - n,
                                             dtype=np.uint64)]
            word = 0
            for e, v in enumerate(lanes):
                word = _put(word, in_off + e * in_w, in_w, v)
            word = _put(word, *in_valid, mask)
            word = _put(word, *in_meta, meta)
            if encoder:
                word = _put(word, *in_offset, offset + start)
            for key, (o, w) in param_fields.items():
                word = _put(word, o, w, p[key])
            want = [int(v) & ((1 << out_w) - 1) for v in expected[start:start + n]]
            want += [0] * (ELEMENTS_PER_BEAT - n)
            beats.append((word, want, mask, meta, (k, start, lanes)))

    run = run_stream(dut, [b[0] for b in beats], idle=idle, backpressure=backpressure,
                     seed=seed)
    assert len(run.outputs) == len(beats)

    problems = []
    n_bad = 0
    for b, (word, (_, want, mask, meta, (k, start, lanes))) in enumerate(
            zip(run.outputs, beats, strict=True)):
        got_mask, got_meta = _get(word, *out_valid), _get(word, *out_meta)
        if got_mask != mask or got_meta != meta:
            n_bad += 1
            problems.append(f"beat {b} (frame {k}, elements {start}…): valid/meta "
                            f"{got_mask:#06x}/{got_meta:#x}, expected {mask:#06x}/{meta:#x}")
        for e in range(ELEMENTS_PER_BEAT):
            got = _get(word, out_off + e * out_w, out_w)
            if got != want[e]:
                n_bad += 1
                valid = (mask >> e) & 1
                where = (f"frame {k} element {start + e} (offset {offsets[k]:#x}, "
                         f"n = {len(frames[k])}, {_show(params[k])})" if valid
                         else f"frame {k} invalid lane {e} of beat {b}")
                problems.append(f"{where}: input {lanes[e]:#x} expected {want[e]:#x} "
                                f"got {got:#x}")
    if problems:
        name = type(dut).__name__
        shown = "\n  ".join(problems[:max_report])
        raise AssertionError(f"{name} ({codec}): {n_bad} mismatches in {len(beats)} beats "
                             f"(idle={idle}, backpressure={backpressure}, seed={seed}); "
                             f"first:\n  {shown}")
    return run, dut, len(beats)


def assert_full_rate(run, dut, n_beats):
    """With no idle and no backpressure: first-beat latency = ``LATENCY``, then
    one beat per cycle with no gap (``n`` beats in ``n + LATENCY`` cycles)."""
    name = type(dut).__name__
    assert run.latency == dut.LATENCY, \
        f"{name}: latency {run.latency}, documented {dut.LATENCY}"
    assert run.max_ready_streak == n_beats, \
        f"{name}: longest back-to-back run {run.max_ready_streak} of {n_beats} beats"
    assert run.cycles == n_beats + dut.LATENCY, \
        f"{name}: {n_beats} beats took {run.cycles} cycles (latency {dut.LATENCY})"
    assert run.beats_per_cycle >= n_beats / (n_beats + dut.LATENCY) - 1e-9
