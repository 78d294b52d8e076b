"""Pieces the TX and RX lanes share: the bypass path of their controllers and the token
stream into the frame merger."""

import functools
import operator

from amaranth import Mux, Signal
from amaranth.lib import stream

from squeezenic_hw.gateware.common.layouts import FrameToken, Reason, field_le
from squeezenic_hw.spec.codecs import CODECS
from squeezenic_hw.spec.header import HDR

__all__ = ["bypass_first_beat", "token_stream", "codec_params_of",
           "code_width_of", "close_when_idle"]


def bypass_first_beat(m, take, *, beat, reason, reasons, bump, goto, next_state="BYPASS"):
    """In the controller's IDLE state: a frame to bypass, its first beat taken (``take``;
    its token, ``built`` = 0 and its ``size``, goes to the descriptor output in the same
    cycle, for the merger's order). ``bump`` counts ``bypass_frames`` and
    ``bypass_<reason>`` (for ``reasons``); a frame of more beats goes on in
    ``next_state`` (``goto(next_state)``, the state machine's move)."""
    with m.If(take):
        bump("bypass_frames")
        with m.Switch(reason):
            for r in reasons:
                with m.Case(Reason[r.name]):
                    bump(f"bypass_{r.value}")
        with m.If(~beat.last):
            goto(next_state)


def token_stream(m, builder):
    """A :class:`FrameToken` stream from a header builder whose tag is
    :func:`~.common.layouts.token_tag_layout`."""
    token = stream.Signature(FrameToken).create()
    tag = builder.o.payload.tag
    m.d.comb += [
        token.valid.eq(builder.o.valid),
        builder.o.ready.eq(token.ready),
        token.payload.built.eq(tag.built),
        token.payload.header.eq(builder.o.payload.header),
        token.payload.size.eq(tag.size),
        token.payload.src.eq(tag.src),
        token.payload.dst.eq(tag.dst),
    ]
    return token


def codec_params_of(params, hdr):
    """Statements loading a :class:`~.codecs.unit.CodecParams` ``params`` from header ``hdr``."""
    return [
        params.param.eq(field_le(hdr, *HDR.PARAM)),
        params.stochastic.eq(field_le(hdr, *HDR.FLAGS)[1]),
        params.scale.eq(field_le(hdr, *HDR.SCALE)),
        params.aux.eq(field_le(hdr, *HDR.AUX)),
        params.seed.eq(field_le(hdr, *HDR.SEED)),
    ]


def code_width_of(codec, param):
    """Bits per code of a frame from its header's ``codec`` id and ``param`` (Values), for
    the fixed-width codecs of the registry: a constant, or the parameter's low 6 bits where
    the parameter gives the width. Ids sharing a width share one compare; the codec with
    the highest id is the default (the classifier lets no other id through)."""
    groups = {}
    for info in sorted(CODECS.values(), key=lambda c: c.id):
        groups.setdefault(info.bits, []).append(info.id)
    widths = [(ids, param[:6] if bits is None else bits) for bits, ids in groups.items()]
    value = widths[-1][1]
    for ids, width in reversed(widths[:-1]):
        value = Mux(functools.reduce(operator.or_, [codec == i for i in ids]), width, value)
    return value


def close_when_idle(m, lane, request, name="close_pending"):
    """Drive ``lane.close`` (a :class:`~.tx.lane.TxLane`) from ``request``, holding a
    one-cycle request until the lane acts on it (``close_done``) at its first idle cycle."""
    pending = Signal(name=name)
    with m.If(lane.close_done):
        m.d.sync += pending.eq(0)
    with m.Elif(request):
        m.d.sync += pending.eq(1)
    m.d.comb += lane.close.eq(request | pending)
