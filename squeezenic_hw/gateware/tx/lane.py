"""The TX lane: host frames in, wire frames out (wire format section 6).

::

    i ─► FrameClassifier ─► TxController ─┬─ jobs ─► EncoderBank ─► WirePacker ─► WireRing ─┐
                                          ├─ desc ─► HeaderBuilder (token queue) ──────────┤
                                          └─ bypass ─► bypass FIFO ────────────────────────┤
                                                                      FrameMerger ─► o ◄───┘

With ``threshold`` built in, its jobs take a second path to the ring::

    jobs (codec 7) ─► SparseCompactor ─► SparseFrameBuilder ─► ring (in frame order)

The builder writes a threshold frame's payload (layout, then values) once the
frame has closed; the dense packer writes as it goes. An order FIFO, pushed
when each wire frame opens, lets whichever path holds the oldest open frame
write the ring, so payloads enter the ring in token order.

The controller decides, in input order, which frames bypass and where wire
frames close, and hands the merger one token per output frame in that
order, so the lane emits exactly the frames of
:func:`squeezenic_hw.reference.lane.tx`, in the same order. Wire frames are
assembled whole in the ring before their header (with ``tuser_size``) leaves;
the ring holds two of the largest wire frames, so assembling one never waits
for the previous one to be sent.
"""

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import EncoderBank
from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    PackMeta,
    axis_signature,
    token_tag_layout,
)
from squeezenic_hw.gateware.common.stream import (
    LutramFifo,
    check_fifo_depth,
    fifo_between,
    fifo_with_room,
    merge_in_order,
)
from squeezenic_hw.gateware.lane.classifier import INPUT_QUEUE, FrameClassifier
from squeezenic_hw.gateware.lane.control import token_stream
from squeezenic_hw.gateware.lane.header_builder import HeaderBuilder
from squeezenic_hw.gateware.lane.merger import FrameMerger
from squeezenic_hw.gateware.sparse.compactor import SparseCompactor
from squeezenic_hw.gateware.sparse.frame_builder import SparseFrameBuilder
from squeezenic_hw.spec.codecs import THRESHOLD_ID, codec_info, resolve_codecs
from squeezenic_hw.spec.header import DEFAULT_MTU, DEFAULT_PORT, HEADER_LEN, check_port

from .controller import TxController, check_controller_parameters, tx_counters_layout
from .packer import WirePacker
from .ring import WireRing

__all__ = ["TxLane", "tx_lane_signature"]


def tx_lane_signature(*, port, idle_timeout):
    """The ports every TX lane has (:class:`TxLane`, :class:`~.narrow.lane.NarrowTxLane`)."""
    return wiring.Signature({
        "i": In(axis_signature()),
        "o": Out(axis_signature()),
        "close": In(1),
        "close_done": Out(1),
        "counters": Out(tx_counters_layout()),
        # run-time settings (plugin registers); undriven, they are the parameters
        "cfg_port": In(16, init=port),
        "cfg_enable": In(1, init=1),
        "cfg_idle_timeout": In(32, init=idle_timeout or 0),
    })


class TxLane(wiring.Component):
    """One 512-bit TX lane: classify, encode, pack, coalesce, write wire headers.

    Parameters
    ----------
    codecs : iterable of str or int, optional
        Codecs built in (default: 0–6; ``threshold``, 7, when named). Host
        frames of other codecs bypass (reason ``codec``).
    mtu : int
        Largest wire frame in bytes, 68…9600 (default 1518; at least 130 with
        ``threshold``).
    port : int
        SqueezeNIC UDP destination port.
    idle_timeout : int or None
        Cycles without a host frame after which the open wire frame closes.
    bypass_depth : int
        Beats of bypassed frames held while earlier wire frames are assembled.
    token_depth : int
        Output frames decided but not yet sent.
    trusted : bool
        ``False`` (default): a host-facing lane; every frame is checked and frames
        that fail a check bypass. ``True``: the lane is fed by a trusted on-chip source
        (a generator) whose every frame is one the lane encodes: a well-formed header
        of a built-in codec, to ``port``, ``tuser_size`` right. The classifier, the
        bypass FIFO and the merger's bypass input are left out; ``cfg_port`` and
        ``cfg_enable`` are ignored. Other frames give undefined output. Not with
        ``threshold`` (its keep mask is the classifier's).
    code_bits : int or None
        With ``trusted=True``: the one code width (2…16) built for the codecs whose
        parameter gives it (``fixed``, ``qsgd``); their frames must all carry this
        parameter. ``None`` (default): every width 2…16. A lane with one code width in
        all (``sign`` alone, or ``fixed`` with ``code_bits``) has its width, capacity
        and size arithmetic folded to constants and a packer for that width only.

    Ports: ``i`` (host AXI-Stream), ``o`` (wire AXI-Stream), ``close`` (close
    the open wire frame when no frame is arriving: the end of a test or a
    register write; ``close_done`` is high in the cycle it was acted on: the open
    frame closed, or none was open), ``counters`` (:data:`~.spec.counters.TX_COUNTERS`),
    ``cfg_port`` / ``cfg_enable`` / ``cfg_idle_timeout`` (run-time settings,
    init ``port``, 1 and ``idle_timeout`` or 0 = never; ``cfg_enable`` = 0
    passes every frame through as ``other_port``).

    Latency: a wire frame's first beat leaves after its last code is packed
    (it needs ``tuser_size``); measured figures are in ``docs/figures.md``.
    Throughput: one host beat per cycle (see ``docs/lanes.md`` for the exact
    conditions). Backpressure on ``o`` stalls the lane once its FIFOs and
    ring are full; nothing is dropped.
    """

    def __init__(self, *, codecs=None, mtu=DEFAULT_MTU, port=DEFAULT_PORT, idle_timeout=None,
                 bypass_depth=64, token_depth=16, trusted=False, code_bits=None):
        check_fifo_depth("bypass_depth", bypass_depth, "beats")
        check_fifo_depth("token_depth", token_depth, "frames")
        if not isinstance(trusted, bool):
            raise ValueError(f"trusted must be a bool, got {trusted!r}")
        self._trusted = trusted
        widths = None
        if code_bits is not None:
            if not trusted:
                raise ValueError("code_bits needs trusted=True (a host-facing lane takes "
                                 "every parameter of fixed and qsgd)")
            param_codecs = {info.name for info in map(codec_info, resolve_codecs(codecs))
                            if info.param_range is not None and not info.variable}
            if not param_codecs:
                raise ValueError(f"code_bits is for fixed or qsgd, which codecs "
                                 f"{codecs!r} do not build in")
            if (isinstance(code_bits, bool) or not isinstance(code_bits, int)
                    or not 2 <= code_bits <= 16):
                raise ValueError(f"code_bits must be an int 2..16, got {code_bits!r}")
            widths = {code_bits} | {info.bits for info in map(codec_info, resolve_codecs(codecs))
                                    if info.bits is not None}
        self._code_bits = code_bits
        # every parameter checked before any block is built (a block left unbuilt by a
        # later error would be an unused elaboratable)
        controller = dict(codecs=codecs, mtu=mtu, idle_timeout=idle_timeout,
                          trusted=trusted, widths=widths, input_buffer=trusted)
        codec_ids, _ = check_controller_parameters(**controller)
        if trusted and THRESHOLD_ID in codec_ids:
            raise ValueError("trusted lanes cannot build threshold in (its keep mask comes "
                             "from the classifier); use trusted=False")
        check_port(port)
        self._controller = TxController(**controller)
        self._codecs = self._controller._codecs
        if trusted:
            self._classifier = None
        else:
            # the classifier is also the lane's input queue (the controller then needs
            # no buffer of its own)
            self._classifier = FrameClassifier("tx", port=port, codecs=self._codecs,
                                               depth=INPUT_QUEUE)
        self._mtu = mtu
        self._bypass_depth = bypass_depth
        self._token_depth = token_depth
        super().__init__(tx_lane_signature(port=port, idle_timeout=idle_timeout))

    @property
    def codecs(self):
        return tuple(self._codecs)

    @property
    def trusted(self):
        """Whether the lane trusts its source (no classifier, no bypass path)."""
        return self._trusted

    def elaborate(self, platform):
        m = Module()
        m.submodules.controller = ctrl = self._controller
        dense = [c for c in self._codecs if c != THRESHOLD_ID]
        sparse = THRESHOLD_ID in self._codecs
        max_beats = -(-(self._mtu - HEADER_LEN) // DATA_BYTES)
        m.submodules.ring = ring = WireRing(max_beats)
        # the header builder is also the token queue (its depth)
        m.submodules.headers = builder = HeaderBuilder(token_tag_layout(),
                                                       depth=self._token_depth)
        m.submodules.merger = merger = FrameMerger(bypass=not self._trusted, banked=True)

        if self._trusted:
            # every frame is processed: only its first beat is marked (the controller's
            # input skid buffer makes ``i.ready`` a register)
            start = Signal(init=1)
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += start.eq(self.i.payload.last)
            m.d.comb += [
                ctrl.i.valid.eq(self.i.valid),
                self.i.ready.eq(ctrl.i.ready),
                ctrl.i.payload.beat.eq(self.i.payload),
                ctrl.i.payload.first.eq(start),
            ]
        else:
            m.submodules.classifier = classifier = self._classifier
            wiring.connect(m, wiring.flipped(self.i), classifier.i)
            wiring.connect(m, classifier.o, ctrl.i)
            m.d.comb += [classifier.cfg_port.eq(self.cfg_port),
                         classifier.cfg_enable.eq(self.cfg_enable)]
        m.d.comb += ctrl.cfg_idle_timeout.eq(self.cfg_idle_timeout)
        m.d.comb += [ctrl.close.eq(self.close), self.close_done.eq(ctrl.close_done),
                     self.counters.eq(ctrl.counters)]

        # payload: controller → encoders → packer → ring → merger (dense codecs), or
        # controller → compactor → builder → ring (threshold)
        writers = {}
        job_ready = {}
        if dense:
            m.submodules.encoders = bank = EncoderBank(dense, meta_shape=PackMeta,
                                                       registered_ready=True)
            m.submodules.packer = packer = WirePacker(self._controller._widths,
                                                      registered_ready=True)
            # a FIFO between the encoders and the packer: the packer's ready (from the
            # ring) stops there, and its room flag, a register, is the encoders' one
            # enable (thousands of loads: no logic in front of it). Distributed RAM
            # behind an output register: a skid buffer's two registers and multiplexer
            # cost more LUTs at this width, and the packer's first stage needs a
            # flip-flop in front of it.
            codes = stream.Signature(packer.i.payload.shape()).create(path=("codes",))
            m.d.comb += [
                bank.i.payload.eq(ctrl.jobs.payload),
                codes.valid.eq(bank.o.valid),
                bank.o.ready.eq(codes.ready),
                codes.payload.codes.eq(bank.o.payload.codes),
                codes.payload.valid.eq(bank.o.payload.valid),
                codes.payload.meta.eq(bank.o.payload.meta.user),
            ]
            fifo_with_room(m, "packer_fifo", codes, packer.i, 4)
            writers[0] = packer.o
            job_ready[0] = (bank.i, bank.i.ready)
        if sparse:
            tail = data.StructLayout({"close_end": unsigned(1), "layout": unsigned(1)})
            m.submodules.compactor = comp = SparseCompactor(meta_shape=tail)
            m.submodules.sparse_builder = spb = SparseFrameBuilder(mtu=self._mtu)
            # a threshold job as the compactor's input: its elements and keep mask
            job = ctrl.jobs.payload
            pack = job.meta.user
            m.d.comb += [
                comp.i.payload.values.as_value().eq(job.elements.as_value()),
                comp.i.payload.keep.eq(pack.keep),
                comp.i.payload.count.eq(pack.count),
                comp.i.payload.base.eq(pack.base),
                comp.i.payload.split.eq(pack.split),
                comp.i.payload.close_mid.eq(pack.close_mid),
                comp.i.payload.meta.close_end.eq(pack.close_end),
                comp.i.payload.meta.layout.eq(pack.layout),
            ]
            # compacted values and indices into the frame builder (the tail fields flat)
            compacted = comp.o.payload
            builder_in = spb.i.payload
            m.d.comb += [
                spb.i.valid.eq(comp.o.valid),
                comp.o.ready.eq(spb.i.ready),
                builder_in.values.eq(compacted.values),
                builder_in.indices.eq(compacted.indices),
                builder_in.kept.eq(compacted.kept),
                builder_in.kept_split.eq(compacted.kept_split),
                builder_in.keep.eq(compacted.keep),
                builder_in.count.eq(compacted.count),
                builder_in.split.eq(compacted.split),
                builder_in.close_mid.eq(compacted.close_mid),
                builder_in.close_end.eq(compacted.meta.close_end),
                builder_in.layout.eq(compacted.meta.layout),
            ]
            writers[1] = spb.o
            job_ready[1] = (comp.i, comp.i.ready)
        self._route_jobs(m, ctrl.jobs, job_ready, writers, ring)
        wiring.connect(m, ring.o, merger.payload)

        # tokens: controller → header builder (and token queue) → merger
        wiring.connect(m, ctrl.desc, builder.i)
        tokens = token_stream(m, builder)
        # A wire frame leaves only once all of it is in the ring, so that it goes out
        # without a gap (the MAC cannot pause inside a frame). Count the frames whose
        # first beat has reached the ring's output and hold built tokens until one is.
        # The count changes when exactly one of ``arrived`` and ``start`` happens, to one
        # of two values prepared from registers (``arrived`` chooses): the merger's late
        # ``start`` reaches only the registers' enable, through one LUT.
        committed = Signal(16)
        committed_nonzero = Signal()
        in_flight = Signal(ring.latency)
        commit = ring.i.valid & ring.i.ready & ring.i.payload.commit
        m.d.sync += in_flight.eq(Cat(commit, in_flight[:-1]))
        gate = ~tokens.payload.built | committed_nonzero
        start = merger.tokens.valid & merger.tokens.ready & tokens.payload.built
        arrived = in_flight[-1]
        committed_up = Signal(16)
        committed_down = Signal(16)
        committed_one = Signal()
        m.d.comb += [committed_up.eq(committed + 1), committed_down.eq(committed - 1),
                     committed_one.eq(committed == 1)]
        with m.If(arrived ^ start):
            m.d.sync += [committed.eq(Mux(arrived, committed_up, committed_down)),
                         committed_nonzero.eq(arrived | ~committed_one)]
        m.d.comb += [
            merger.tokens.payload.eq(tokens.payload),
            merger.tokens.valid.eq(tokens.valid & gate),
            tokens.ready.eq(merger.tokens.ready & gate),
        ]
        if self._trusted:
            m.d.comb += ctrl.bypass.ready.eq(1)   # never valid
        else:
            # a deep queue of whole bypassed beats: block RAM, read into a register
            fifo_between(m, "bypass_fifo", ctrl.bypass, merger.bypass, self._bypass_depth,
                         block_ram=True)

        wiring.connect(m, merger.o, wiring.flipped(self.o))
        return m

    @staticmethod
    def _route_jobs(m, jobs, targets, writers, ring):
        """Jobs to the dense (0) or threshold (1) path; ring writes in frame order.

        Each path writes a frame's payload with ``commit`` on its last write, the
        dense packer while the frame is open, the threshold builder after it has
        closed. The kind of every wire frame is queued when the frame opens (in
        controller order) and the ring takes writes only from the path of the
        oldest queued frame, so payloads enter the ring in token order.
        """
        if len(writers) == 1:
            (kind, (port, ready)), = targets.items()
            m.d.comb += [port.valid.eq(jobs.valid), jobs.ready.eq(ready)]
            wiring.connect(m, writers[kind], ring.i)
            return
        order = m.submodules.frame_order = LutramFifo(width=1, depth=16)
        pack = jobs.payload.meta.user
        kind = jobs.payload.meta.codec == THRESHOLD_ID
        is_open = Signal()          # a wire frame is open (as seen in the job stream)
        opens = ((pack.count != 0) & ~is_open) | pack.close_mid
        dense_port, dense_ready = targets[0]
        sparse_port, sparse_ready = targets[1]
        ready = Mux(kind, sparse_ready, dense_ready) & (~opens | order.w_rdy)
        fire = jobs.valid & ready
        m.d.comb += [
            jobs.ready.eq(ready),
            dense_port.valid.eq(jobs.valid & ~kind & (~opens | order.w_rdy)),
            sparse_port.valid.eq(jobs.valid & kind & (~opens | order.w_rdy)),
            order.w_data.eq(kind),
            order.w_en.eq(fire & opens),
        ]
        with m.If(fire):
            with m.If(pack.close_end):
                m.d.sync += is_open.eq(0)
            with m.Elif((pack.count != 0) | pack.close_mid):
                m.d.sync += is_open.eq(1)
        dense_writes, sparse_writes = writers[0], writers[1]
        merge_in_order(m, order, [
            (dense_writes, dense_writes.payload, dense_writes.payload.commit),
            (sparse_writes, sparse_writes.payload, sparse_writes.payload.commit),
        ], ring.i)
