"""The RX lane: wire frames in, host frames out (wire format section 7).

::

    i ─► FrameClassifier (queue) ─► RxController ─┬─ payload ─► FIFO ─┬─► WireUnpacker ─┐
                                                  ├─ frames ─► FIFO ──┘    DecoderBank ◄─┘
                                                  ├─ desc ─► FIFO ─► HostFrameSplitter ─► │
                                                  │      HeaderBuilder (token queue) ───┤ │
                                                  └─ bypass ─► bypass FIFO ─────────────┤ │
                                                                  FrameMerger ◄─────────┴─┘
                                                                       └─► o

Host frames stream through (a host frame's length is known from the wire
header), so the RX lane does not store whole frames: the merger sends a host
frame's header as soon as its token is ready and its payload as the decoders
deliver it.

With ``threshold`` built in, a threshold frame's bitmap goes through the
unpacker as one-bit codes (an index list is first turned into that bitmap by
the ``IndexToBitmap``), and the ``SparseExpander`` between the unpacker and
the decoders puts the frame's values where the bits are set::

    payload ─► FIFO ─┐                      values ─► FIFO ─┐
    index ─► IndexToBitmap ─┴► (frame order) ─► WireUnpacker ─► SparseExpander ─► DecoderBank
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import DecoderBank, codec_widths
from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    axis_signature,
    token_tag_layout,
)
from squeezenic_hw.gateware.common.stream import (
    check_fifo_depth,
    fifo_with_room,
    merge_in_order,
)
from squeezenic_hw.gateware.lane.classifier import INPUT_QUEUE, FrameClassifier
from squeezenic_hw.gateware.lane.control import token_stream
from squeezenic_hw.gateware.lane.header_builder import HeaderBuilder
from squeezenic_hw.gateware.lane.merger import FrameMerger
from squeezenic_hw.gateware.sparse.expander import SparseExpander
from squeezenic_hw.gateware.sparse.index_to_bitmap import IndexToBitmap
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.counters import RX_COUNTERS
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_PORT, check_port

from .controller import RxController, rx_counters_layout, rx_payload_tag_layout
from .host_frame_splitter import HostFrameSplitter, check_max_host_elements
from .unpacker import WireUnpacker

__all__ = ["RxLane"]


class RxLane(wiring.Component):
    """One 512-bit RX lane: classify, unpack, decode, split into host frames.

    Parameters
    ----------
    codecs : iterable of str or int, optional
        Codecs built in (default: 0–6; ``threshold``, 7, when named).
    max_host_elements : int
        Most elements per host frame, 1…2384 (default 363: 1516-byte frames).
    port : int
        SqueezeNIC UDP destination port.
    bypass_depth, token_depth, payload_depth : int
        FIFO depths: beats of bypassed frames; output frames decided but not
        sent; wire payload beats waiting for the unpacker. The FIFOs the
        controller writes (bypass, payload) have two entries more, the slack of
        their registered ready.

    Ports: ``i`` (wire AXI-Stream), ``o`` (host AXI-Stream), ``counters``
    (:data:`~squeezenic_hw.spec.counters.RX_COUNTERS`), ``cfg_port`` / ``cfg_enable``
    (run-time port and enable, init ``port`` and 1; ``cfg_enable`` = 0 passes
    every frame through as ``other_port``).

    Block boundaries have registered ready signals: the classifier's queue (its
    ``depth``) at the input, FIFOs whose ready to the controller is a flip-flop
    (:func:`~squeezenic_hw.gateware.common.stream.fifo_with_room`), the unpacker's own
    registered ``i.ready``.

    Latency: measured in ``docs/figures.md``. Throughput: one host beat per
    cycle while decoded data is available (a wire beat of b-bit codes carries
    ``512/b`` elements, so the wire side is read at ``b/32`` beats per cycle
    or less). Backpressure on ``o`` stalls the lane; nothing is dropped.
    """

    def __init__(self, *, codecs=None, max_host_elements=DEFAULT_HOST_ELEMENTS,
                 port=DEFAULT_PORT, bypass_depth=62, token_depth=16, payload_depth=16):
        check_fifo_depth("bypass_depth", bypass_depth, "beats")
        check_fifo_depth("token_depth", token_depth, "frames")
        check_fifo_depth("payload_depth", payload_depth, "beats")
        # every parameter checked before any block is built (a block left unbuilt by a
        # later error would be an unused elaboratable)
        check_max_host_elements(max_host_elements)
        check_port(port)
        resolve_codecs(codecs)
        self._splitter = HostFrameSplitter(max_host_elements=max_host_elements)
        self._controller = RxController(codecs=codecs, max_host_elements=max_host_elements)
        # the classifier is also the lane's input queue: a registered ready in front of
        # the controller
        self._classifier = FrameClassifier("rx", port=port,
                                           codecs=self._controller._codecs,
                                           depth=INPUT_QUEUE)
        self._codecs = self._controller._codecs
        self._max_host = max_host_elements
        self._bypass_depth = bypass_depth
        self._token_depth = token_depth
        self._payload_depth = payload_depth
        self._frame_depth = 8
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(axis_signature()),
            "counters": Out(rx_counters_layout()),
            # run-time settings (plugin registers); undriven, they are the parameters
            "cfg_port": In(16, init=port),
            "cfg_enable": In(1, init=1),
        })

    @property
    def codecs(self):
        return tuple(self._codecs)

    def elaborate(self, platform):
        m = Module()
        m.submodules.classifier = classifier = self._classifier
        m.submodules.controller = ctrl = self._controller
        m.submodules.splitter = splitter = self._splitter
        sparse = THRESHOLD_ID in self._codecs
        widths = codec_widths(self._codecs) | ({1} if sparse else set())
        m.submodules.unpacker = unpacker = WireUnpacker(
            widths, max_host_elements=self._max_host, tag_shape=rx_payload_tag_layout())
        m.submodules.decoders = bank = DecoderBank(self._codecs)
        # the header builder is also the token queue (its depth)
        m.submodules.headers = builder = HeaderBuilder(token_tag_layout(),
                                                       depth=self._token_depth)
        m.submodules.merger = merger = FrameMerger()

        wiring.connect(m, wiring.flipped(self.i), classifier.i)
        # The classifier's queue stands between the lane's input and the controller: the
        # lane's i.ready (its room) never waits on the controller's decisions.
        wiring.connect(m, classifier.o, ctrl.i)
        m.d.comb += [classifier.cfg_port.eq(self.cfg_port),
                     classifier.cfg_enable.eq(self.cfg_enable)]
        sparse_counters = {}
        if sparse:
            sparse_counters = {name: Signal(32, name=name)
                               for name in ("sparse_count_errors", "sparse_layout_errors")}
        for name in RX_COUNTERS:
            source = splitter.host_frames if name == "host_frames" else ctrl.counters[name]
            m.d.comb += self.counters[name].eq(sparse_counters.get(name, source))

        # payload: controller → unpacker → decoders → merger
        # The FIFO lets the controller reach the next wire header while this frame's
        # payload is still being decoded, so the next host header's token (a longer
        # path) is ready when the merger needs it: no bubble between host frames.
        pay = stream.Signature(ctrl.payload.payload.shape()).create()
        fifo_with_room(m, "payload_fifo", ctrl.payload, pay, self._payload_depth)
        # each decoded frame's n, width, n·width and codec parameters, for the unpacker
        fifo_with_room(m, "frame_fifo", ctrl.frames, unpacker.desc, self._frame_depth)
        if sparse:
            jobs = self._sparse_path(m, ctrl, pay, unpacker, sparse_counters)
        else:
            m.d.comb += [unpacker.i.payload.data.eq(pay.payload.data),
                         unpacker.i.payload.zero.eq(pay.payload.zero),
                         unpacker.i.valid.eq(pay.valid), pay.ready.eq(unpacker.i.ready)]
            jobs = unpacker.o
        job = jobs.payload
        m.d.comb += [
            bank.i.valid.eq(jobs.valid),
            jobs.ready.eq(bank.i.ready),
            bank.i.payload.valid.eq((Const(1, ELEMENTS_PER_BEAT + 1) << job.count) - 1),
            bank.i.payload.params.eq(job.tag.params),
            bank.i.payload.meta.codec.eq(job.tag.codec),
        ]
        for e in range(ELEMENTS_PER_BEAT):
            m.d.comb += bank.i.payload.codes[e].eq(job.codes[e])
        m.d.comb += [
            merger.payload.valid.eq(bank.o.valid),
            bank.o.ready.eq(merger.payload.ready),
            merger.payload.payload.eq(Cat(*bank.o.payload.elements)),
        ]

        # tokens: controller → FIFO → splitter → header builder (the token queue) → merger
        fifo_with_room(m, "desc_fifo", ctrl.desc, splitter.i, 4)
        wiring.connect(m, splitter.o, builder.i)
        wiring.connect(m, token_stream(m, builder), merger.tokens)
        # a deep queue of whole bypassed beats: block RAM
        fifo_with_room(m, "bypass_fifo", ctrl.bypass, merger.bypass,
                             self._bypass_depth, block_ram=True)

        wiring.connect(m, merger.o, wiring.flipped(self.o))
        return m

    def _sparse_path(self, m, ctrl, pay, unpacker, counters):
        """Threshold decoding around the unpacker; returns the jobs for the decoders."""
        m.submodules.index_to_bitmap = conv = IndexToBitmap()
        m.submodules.expander = exp = SparseExpander(tag_shape=rx_payload_tag_layout())
        fifo_with_room(m, "index_desc_fifo", ctrl.index_desc, conv.desc, 4)
        fifo_with_room(m, "index_fifo", ctrl.index, conv.i, 4)
        fifo_with_room(m, "vdesc_fifo", ctrl.vdesc, exp.vdesc, 8)
        fifo_with_room(m, "values_fifo", ctrl.values, exp.values, self._payload_depth)

        # The unpacker takes each decoded frame's beats from the payload FIFO or, for
        # an index-list frame, from the IndexToBitmap: in frame order. (The frame's
        # descriptor, from the controller, already says 1-bit codes of n elements.)
        order = fifo_with_room(m, "order_fifo", ctrl.order, None, 8)
        merge_in_order(m, order, [(pay, Cat(pay.payload.data, pay.payload.zero),
                                   pay.payload.last),
                                  (conv.o, Cat(conv.o.payload.data, 0), conv.o.payload.last)],
                       unpacker.i)

        job = unpacker.o.payload
        m.d.comb += [
            exp.i.valid.eq(unpacker.o.valid),
            unpacker.o.ready.eq(exp.i.ready),
            exp.i.payload.codes.eq(job.codes),
            exp.i.payload.count.eq(job.count),
            exp.i.payload.frame_last.eq(job.frame_last),
            exp.i.payload.sparse.eq(job.tag.codec == THRESHOLD_ID),
            exp.i.payload.tag.eq(job.tag),
        ]
        conv_error = conv.o.valid & conv.o.ready & conv.o.payload.last & conv.o.payload.error
        c_count, c_layout = counters["sparse_count_errors"], counters["sparse_layout_errors"]
        m.d.sync += [
            c_count.eq(c_count + exp.count_error),
            c_layout.eq(c_layout + ctrl.layout_error + conv_error),
        ]
        return exp.o
