"""AXI-Lite clock-domain crossing, one transaction at a time (toggle handshake)."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from .bus import AxiLiteSignature

__all__ = ["AxiLiteClockBridge"]


class AxiLiteClockBridge(wiring.Component):
    """Carries AXI-Lite transactions from ``s`` (in ``s_domain``) to ``m`` (in ``m_domain``).

    The ``s`` side holds an ``aw``, a ``w`` and an ``ar`` in holding registers (each
    accepted independently, in any order). When a whole write (``aw`` and ``w``) or a
    read is held and nothing is in flight, it copies it into request registers and
    flips a request toggle. The toggle crosses through a 2-FF
    :class:`~amaranth.lib.cdc.FFSynchronizer`; the ``m`` side then copies the request
    (stable since before the toggle flipped) and issues it on ``m``. When the response
    arrives it stores it and flips an acknowledge toggle, which crosses back the same
    way; the ``s`` side copies the response and presents it on ``s``. Only the two
    toggles cross through synchronizers; the multi-bit request and response registers
    are sampled only after their toggle has been synchronized, so they have been
    stable for at least two destination cycles. That makes the bridge correct for any
    clock relation (the phase-aligned 125/250 MHz ``axil_aclk``/``axis_aclk`` of
    OpenNIC included); in synthesis the request/response registers want a
    ``set_max_delay -datapath_only`` of about one destination period.

    If a whole write and a read are both waiting, they take turns (the kind not
    served last goes first), so neither channel starves the other.

    Parameters
    ----------
    s_domain : str
        Domain of ``s`` (the side facing the AXI-Lite master, e.g. OpenNIC's ``axil_aclk``).
    m_domain : str
        Domain of ``m`` (the side facing the slave). May equal ``s_domain`` (the bridge
        then just adds latency).

    Notes
    -----
    Latency, counted on ``s`` from the cycle of the last request handshake (last of
    ``aw``/``w``, or ``ar``) to the first cycle of ``bvalid``/``rvalid``: 1 ``s``
    cycle to launch; 2 ``m`` cycles of synchronizer + 1 to raise ``m``'s valid; 1
    for the ``m`` handshake (slave ready) and ``L`` more to the slave's response
    (``L`` = 2 for :class:`~squeezenic_hw.gateware.axil.register_file.AxiLiteRegisterFile`
    writes, ``read_latency`` for its reads), taken at once; then 2 ``s`` cycles of
    synchronizer + 1 to raise the response. In all, at most ``5`` ``s`` cycles plus
    ``L + 4`` ``m`` cycles (fewer when edges line up). Measured in simulation at
    125/250 MHz phase aligned with ``L = 2``: 7 ``axil`` cycles (56 ns); 7 ns/4 ns:
    7-8; 4 ns/7 ns: 13-14 ``s`` cycles.

    Throughput: one transaction in flight; the next ``aw``, ``w`` and ``ar`` are
    accepted into the holding registers meanwhile. Back to back, one transaction per
    latency above plus the response handshake (a read may launch while a write
    response waits for ``bready``, and vice versa).

    Backpressure: ``s.bvalid``/``s.rvalid`` and their payloads are registers held
    until ``s.bready``/``s.rready``; ``m.bready``/``m.rready`` are raised only while a
    response is awaited, and ``m``'s ``*valid`` are held until their handshakes.
    Every transaction accepted on ``s`` gets exactly one response. Reset both domains
    together: a reset of one side alone in mid-transaction desynchronises the toggles.
    Reset: the flags, toggles and valid bits; the address, data and response
    registers take none.
    """

    def __init__(self, *, s_domain="axil", m_domain="sync"):
        for param, value in (("s_domain", s_domain), ("m_domain", m_domain)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{param}: {value!r} is not a domain name")
        self._s_domain = s_domain
        self._m_domain = m_domain
        super().__init__({
            "s": In(AxiLiteSignature()),
            "m": Out(AxiLiteSignature()),
        })

    @property
    def s_domain(self):
        return self._s_domain

    @property
    def m_domain(self):
        return self._m_domain

    def elaborate(self, platform):
        m = Module()
        s_d = m.d[self._s_domain]
        m_d = m.d[self._m_domain]
        s, mb = self.s, self.m

        # -- s side: holding registers ------------------------------------------------
        # Flags, toggles and valids are reset; addresses, data and responses (read only
        # while their flag says so) take none.
        aw_full, aw_addr = Signal(), Signal(32, reset_less=True)
        w_full, w_data = Signal(), Signal(32, reset_less=True)
        ar_full, ar_addr = Signal(), Signal(32, reset_less=True)
        m.d.comb += [
            s.awready.eq(~aw_full),
            s.wready.eq(~w_full),
            s.arready.eq(~ar_full),
        ]
        with m.If(s.awvalid & s.awready):
            s_d += [aw_full.eq(1), aw_addr.eq(s.awaddr)]
        with m.If(s.wvalid & s.wready):
            s_d += [w_full.eq(1), w_data.eq(s.wdata)]
        with m.If(s.arvalid & s.arready):
            s_d += [ar_full.eq(1), ar_addr.eq(s.araddr)]

        # -- request: s-domain registers, stable from the toggle flip until the ack -----
        req_toggle = Signal()
        req_write = Signal(reset_less=True)
        req_addr = Signal(32, reset_less=True)
        req_data = Signal(32, reset_less=True)
        # -- response: m-domain registers, stable from the ack flip until the next req --
        ack_toggle = Signal()
        resp_code = Signal(2, reset_less=True)
        resp_data = Signal(32, reset_less=True)

        req_sync = Signal()
        ack_sync = Signal()
        m.submodules.req_sync = FFSynchronizer(req_toggle, req_sync, o_domain=self._m_domain)
        m.submodules.ack_sync = FFSynchronizer(ack_toggle, ack_sync, o_domain=self._s_domain)

        # -- s side: launch, wait, respond ---------------------------------------------
        busy = Signal()          # a request is in flight
        last_write = Signal()    # kind served last, for turn-taking
        bvalid, bresp = Signal(), Signal(2, reset_less=True)
        rvalid, rresp, rdata = Signal(), Signal(2, reset_less=True), Signal(32, reset_less=True)
        ack_seen = Signal()
        m.d.comb += [
            s.bvalid.eq(bvalid), s.bresp.eq(bresp),
            s.rvalid.eq(rvalid), s.rresp.eq(rresp), s.rdata.eq(rdata),
        ]
        # A write launches only once the previous write response has been taken (and a
        # read likewise), so a response register is never overwritten while presented.
        can_write = ~busy & ~bvalid & aw_full & w_full
        can_read = ~busy & ~rvalid & ar_full
        launch_write = can_write & (~can_read | ~last_write)
        launch_read = can_read & ~launch_write
        with m.If(launch_write):
            s_d += [req_write.eq(1), req_addr.eq(aw_addr), req_data.eq(w_data),
                    req_toggle.eq(~req_toggle), busy.eq(1), last_write.eq(1),
                    aw_full.eq(0), w_full.eq(0)]
        with m.If(launch_read):
            s_d += [req_write.eq(0), req_addr.eq(ar_addr),
                    req_toggle.eq(~req_toggle), busy.eq(1), last_write.eq(0),
                    ar_full.eq(0)]
        with m.If(busy & (ack_sync != ack_seen)):
            s_d += [ack_seen.eq(ack_sync), busy.eq(0)]
            with m.If(req_write):
                s_d += [bvalid.eq(1), bresp.eq(resp_code)]
            with m.Else():
                s_d += [rvalid.eq(1), rresp.eq(resp_code), rdata.eq(resp_data)]
        with m.If(s.bvalid & s.bready):
            s_d += bvalid.eq(0)
        with m.If(s.rvalid & s.rready):
            s_d += rvalid.eq(0)

        # -- m side: issue the request on m, collect the response ------------------------
        req_seen = Signal()
        m_busy = Signal()
        awvalid, wvalid, arvalid = Signal(), Signal(), Signal()
        bready, rready = Signal(), Signal()
        m_addr, m_data = Signal(32, reset_less=True), Signal(32, reset_less=True)
        m.d.comb += [
            mb.awvalid.eq(awvalid), mb.awaddr.eq(m_addr),
            mb.wvalid.eq(wvalid), mb.wdata.eq(m_data),
            mb.arvalid.eq(arvalid), mb.araddr.eq(m_addr),
            mb.bready.eq(bready), mb.rready.eq(rready),
        ]
        with m.If(~m_busy & (req_sync != req_seen)):
            # req_* have been stable since before req_toggle flipped.
            m_d += [req_seen.eq(req_sync), m_busy.eq(1),
                    m_addr.eq(req_addr), m_data.eq(req_data)]
            with m.If(req_write):
                m_d += [awvalid.eq(1), wvalid.eq(1), bready.eq(1)]
            with m.Else():
                m_d += [arvalid.eq(1), rready.eq(1)]
        with m.If(mb.awvalid & mb.awready):
            m_d += awvalid.eq(0)
        with m.If(mb.wvalid & mb.wready):
            m_d += wvalid.eq(0)
        with m.If(mb.arvalid & mb.arready):
            m_d += arvalid.eq(0)
        with m.If(mb.bvalid & mb.bready):
            m_d += [bready.eq(0), m_busy.eq(0), resp_code.eq(mb.bresp),
                    ack_toggle.eq(~ack_toggle)]
        with m.If(mb.rvalid & mb.rready):
            m_d += [rready.eq(0), m_busy.eq(0), resp_code.eq(mb.rresp),
                    resp_data.eq(mb.rdata), ack_toggle.eq(~ack_toggle)]
        return m
