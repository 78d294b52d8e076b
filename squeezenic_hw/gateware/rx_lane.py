"""The RX lane: wire frames in, host frames out (wire format section 7).

::

    i ─► FrameClassifier ─► RxController ─┬─ payload ─► FIFO ─► WireUnpacker ─► DecoderBank ─┐
                                          ├─ desc ─► FIFO ─► HostFrameSplitter ─►           │
                                          │      HeaderBuilder ─► token FIFO ───────────────┤
                                          └─ bypass ─► bypass FIFO ─────────────────────────┤
                                                                      FrameMerger ─► o ◄────┘

Host frames stream through (a host frame's length is known from the wire
header), so the RX lane does not store whole frames: the merger sends a host
frame's header as soon as its token is ready and its payload as the decoders
deliver it.
"""

from amaranth import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..frames import DEFAULT_HOST_ELEMENTS, DEFAULT_PORT
from .codec_bank import DecoderBank, codec_widths
from .codec_unit import ELEMENTS_PER_BEAT
from .frame_classifier import FrameClassifier
from .frame_merger import FrameMerger
from .header_builder import HeaderBuilder
from .host_frame_splitter import HostFrameSplitter
from .lane_common import check_fifo_depth, token_stream
from .lane_layouts import axis_signature, quiet_if_rejected
from .rx_controller import RX_COUNTERS, RxController, rx_counters_layout, rx_payload_tag_layout
from .tx_controller import token_tag_layout
from .tx_lane import fifo_between
from .wire_unpacker import WireUnpacker

__all__ = ["RxLane"]


class RxLane(wiring.Component):
    """One 512-bit RX lane: classify, unpack, decode, split into host frames.

    Parameters
    ----------
    codecs : iterable of str or int, optional
        Codecs built in (default: every codec, 0–6).
    max_host_elements : int
        Most elements per host frame, 1…2384 (default 363: 1516-byte frames).
    port : int
        SqueezeNIC UDP destination port.
    bypass_depth, token_depth, payload_depth : int
        FIFO depths: beats of bypassed frames; output frames decided but not
        sent; wire payload beats waiting for the unpacker.

    Ports: ``i`` (wire AXI-Stream), ``o`` (host AXI-Stream), ``counters``
    (:data:`~.rx_controller.RX_COUNTERS`), ``cfg_port`` / ``cfg_enable``
    (run-time port and enable, init ``port`` and 1; ``cfg_enable`` = 0 passes
    every frame through as ``other_port``).

    Latency: measured in ``docs/figures.md``. Throughput: one host beat per
    cycle while decoded data is available (a wire beat of b-bit codes carries
    ``512/b`` elements, so the wire side is read at ``b/32`` beats per cycle
    or less). Backpressure on ``o`` stalls the lane; nothing is dropped.
    """

    @quiet_if_rejected
    def __init__(self, *, codecs=None, max_host_elements=DEFAULT_HOST_ELEMENTS,
                 port=DEFAULT_PORT, bypass_depth=64, token_depth=16, payload_depth=16):
        check_fifo_depth("bypass_depth", bypass_depth, "beats")
        check_fifo_depth("token_depth", token_depth, "frames")
        self._splitter = HostFrameSplitter(max_host_elements=max_host_elements)
        self._controller = RxController(codecs=codecs)
        self._classifier = FrameClassifier("rx", port=port,
                                           codecs=self._controller._codecs)
        self._codecs = self._controller._codecs
        self._max_host = max_host_elements
        self._bypass_depth = bypass_depth
        self._token_depth = token_depth
        check_fifo_depth("payload_depth", payload_depth, "beats")
        self._payload_depth = payload_depth
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
        m.submodules.unpacker = unpacker = WireUnpacker(
            codec_widths(self._codecs), max_host_elements=self._max_host,
            tag_shape=rx_payload_tag_layout())
        m.submodules.decoders = bank = DecoderBank(self._codecs)
        m.submodules.headers = builder = HeaderBuilder(token_tag_layout())
        m.submodules.merger = merger = FrameMerger()

        wiring.connect(m, wiring.flipped(self.i), classifier.i)
        wiring.connect(m, classifier.o, ctrl.i)
        m.d.comb += [classifier.cfg_port.eq(self.cfg_port),
                     classifier.cfg_enable.eq(self.cfg_enable)]
        for name in RX_COUNTERS:
            source = splitter.host_frames if name == "host_frames" else ctrl.counters[name]
            m.d.comb += self.counters[name].eq(source)

        # payload: controller → unpacker → decoders → merger
        # The FIFO lets the controller reach the next wire header while this frame's
        # payload is still being decoded, so the next host header's token (a longer
        # path) is ready when the merger needs it: no bubble between host frames.
        fifo_between(m, "payload_fifo", ctrl.payload, unpacker.i, self._payload_depth)
        job = unpacker.o.payload
        m.d.comb += [
            bank.i.valid.eq(unpacker.o.valid),
            unpacker.o.ready.eq(bank.i.ready),
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

        # tokens: controller → FIFO → splitter → header builder → token FIFO → merger
        fifo_between(m, "desc_fifo", ctrl.desc, splitter.i, 4)
        wiring.connect(m, splitter.o, builder.i)
        token = token_stream(m, builder)
        fifo_between(m, "token_fifo", token, merger.tokens, self._token_depth)
        fifo_between(m, "bypass_fifo", ctrl.bypass, merger.bypass, self._bypass_depth)

        wiring.connect(m, merger.o, wiring.flipped(self.o))
        return m
