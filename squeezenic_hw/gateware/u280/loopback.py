"""The top of the on-chip loopback of the paper's set-up on an Alveo U280.

:class:`U280Loopback` is a top-level design for
:class:`~squeezenic_hw.platforms.u280.AlveoU280Platform`: N = ``host_bw``/100
on-chip generators → :class:`~squeezenic_hw.gateware.arrays.lane_arrays.TxArray` → (one
512-bit wire stream, no MAC) → :class:`~squeezenic_hw.gateware.arrays.lane_arrays.RxArray`
→ N frame checkers, all at 250 MHz. It is what the paper's Table 6 measures (one
100 Gb/s generator per 100 Gb/s of emulated host bandwidth), without the OpenNIC shell.

Clocking and reset: the board's 100 MHz ``sysclk`` 0 feeds an ``MMCME4_BASE``
(VCO 1000 MHz = 100 MHz × 10, CLKOUT0 = VCO / 4 = 250 MHz) and a ``BUFG`` drives
the ``sync`` domain. Its reset is held until the MMCM reports ``LOCKED`` (a
:class:`~amaranth.lib.cdc.ResetSynchronizer`, two flip-flops). The generators
start on the first cycle after reset and run ``n_frames`` frames (0: forever).

Observation: the board has no user LED, so the results are read over JTAG.
For every lane ``k`` three registers carry ``mark_debug``: ``lane{k}_ok``,
``lane{k}_frames`` (frames counted by the checker, 64 bits) and ``lane{k}_crc``
(its running CRC-32), plus ``all_ok``. ``lane{k}_ok`` is 1 once the lane has
checked a frame and no error counter moved: no offset gap, no frame bypassed
by the TX lane, the RX lane or the checker, no ``tuser_size`` error. The build
plan (:mod:`squeezenic_hw.flows.u280`) inserts an ILA on these nets after synthesis; the
ILA's loads are also what keeps the checkers, and so the whole datapath, from being
trimmed.
"""

from amaranth import Cat, ClockDomain, ClockSignal, Elaboratable, Module, Signal
from amaranth.hdl import Instance
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer

from squeezenic_hw.build.params import check_int, check_param
from squeezenic_hw.gateware.arrays.lane_arrays import RxArray, TxArray
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.generator import GeneratorConfig, config_values
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_MTU,
    DEFAULT_PORT,
)
from squeezenic_hw.spec.scaling import lanes_for

__all__ = ["U280Loopback", "DEFAULT_CONFIG", "MMCM_PARAMS"]

#: Default generator settings: the sign codec (32×), so that even 3200 Gb/s of
#: host data (32 lanes) fits in one 100 Gb/s wire; every lane at 100 Gb/s
#: (50 bytes per 250 MHz cycle), 1516-byte host frames. Bit 0 decodes to +1.0
#: (``scale``) and bit 1 to −1.0 (``aux``): with both at +1.0 every decoded
#: value would be 1.0 and the checkers' CRC could not see a wrong sign.
DEFAULT_CONFIG = GeneratorConfig(codec=5, scale_bits=0x3F800000, aux_bits=0xBF800000)

#: ``MMCME4_BASE`` settings: 100 MHz in, VCO 1000 MHz (800–1600 MHz allowed on
#: UltraScale+), CLKOUT0 250 MHz.
MMCM_PARAMS = {
    "BANDWIDTH": "OPTIMIZED",
    "CLKIN1_PERIOD": 10.0,
    "DIVCLK_DIVIDE": 1,
    "CLKFBOUT_MULT_F": 10.0,
    "CLKFBOUT_PHASE": 0.0,
    "CLKOUT0_DIVIDE_F": 4.0,
    "CLKOUT0_DUTY_CYCLE": 0.5,
    "CLKOUT0_PHASE": 0.0,
    "REF_JITTER1": 0.010,
    "STARTUP_WAIT": "FALSE",
}

# Which ctrl fields come from config_values (the others are set per lane by TxArray).
_CTRL_FIELDS = ("elements", "codec", "param", "stochastic", "scale", "aux", "seed",
                "value_seed", "offset", "flush_every", "rate_bytes_per_cycle")


class U280Loopback(Elaboratable):
    """Top of the U280 on-chip loopback: generators → TX array → RX array → checkers.

    Parameters
    ----------
    host_bw : int
        Emulated host bandwidth in Gb/s, a multiple of 100 from 100 to 6400
        (``host_bw``/100 lanes).
    codecs : iterable of str or int, optional
        Codecs built into every lane; default: only ``config.codec``. Must
        include ``config.codec`` (otherwise every frame would bypass).
    mtu, port :
        Wire MTU and SqueezeNIC UDP port, as :class:`~squeezenic_hw.gateware.tx.lane.TxLane`.
    max_host_elements : int
        Largest host frame (elements) of the generators and the RX lanes;
        at least ``config.elements``.
    config : GeneratorConfig, optional
        The generators' run (:data:`DEFAULT_CONFIG` if ``None``). Lane ``k``
        uses ``value_seed + k`` and UDP source port ``0x5000 + k`` (TxArray);
        ``config.udp_src_port``, ``tuser_src`` and ``tuser_dst`` are not used.
    n_frames : int
        Frames per lane, 0 = run forever (default).
    idle_timeout : int or None
        Cycles without a host frame after which a TX lane closes its open wire
        frame (default 256), so that a finite run is checked to its end.

    Attributes
    ----------
    lane_ok, lane_frames, lane_crc : list of Signal
        Per lane, registered (one cycle after the checker): the health bit,
        the checker's frame count (64 bits) and running CRC-32; ``mark_debug``.
    all_ok : Signal
        AND of ``lane_ok``, one cycle later; ``mark_debug``.

    The design has no ports of its own: with a platform it requests ``sysclk``
    0 and ``hbm_cattrip`` 0 and makes ``sync`` from the MMCM; elaborated with
    ``platform=None`` (simulation) it defines a plain ``sync`` domain for the
    testbench instead. Latency and throughput are those of the arrays
    (``docs/arrays.md``); the wire stream is never backpressured from outside
    (the checkers are always ready).
    """

    def __init__(self, host_bw=400, *, codecs=None, mtu=DEFAULT_MTU, port=DEFAULT_PORT,
                 max_host_elements=DEFAULT_HOST_ELEMENTS, config=None, n_frames=0,
                 idle_timeout=256):
        self.n_lanes = lanes_for(host_bw)
        config = DEFAULT_CONFIG if config is None else config
        if not isinstance(config, GeneratorConfig):
            raise ValueError(f"config must be a GeneratorConfig, got {config!r}")
        # mtu and port are the lanes' too; checked here first, as the plugin's build
        # parameters are, so that no half-built array is left behind (its parts would warn
        # as unused elaboratables)
        for name, value in (("mtu", mtu), ("port", port),
                            ("max_host_elements", max_host_elements)):
            check_param(name, value)
        if config.elements > max_host_elements:
            raise ValueError(f"config.elements ({config.elements}) exceeds max_host_elements "
                             f"({max_host_elements})")
        check_int("n_frames", n_frames, 0, 2**32 - 1)
        if idle_timeout is not None:
            check_int("idle_timeout", idle_timeout, 1, 2**32 - 1)
        codecs = (config.codec,) if codecs is None else tuple(codecs)
        try:
            ids = {codec_info(c).id for c in codecs}
        except ValueError as e:
            raise ValueError(f"codecs: {e}") from None
        if config.codec not in ids:
            raise ValueError(f"codecs must include config.codec ({config.codec}), "
                             f"got {list(codecs)!r}")
        self.host_bw = host_bw
        self.codecs = codecs
        self.mtu = mtu
        self.port = port
        self.max_host_elements = max_host_elements
        self.config = config
        self.n_frames = n_frames
        self.idle_timeout = idle_timeout
        self._tx, self._rx = self._arrays()
        # mark_debug registers (see the module docstring); names = ILA net names
        debug = {"mark_debug": "true"}
        n = self.n_lanes
        self.lane_ok = [Signal(name=f"lane{k}_ok", attrs=debug) for k in range(n)]
        self.lane_frames = [Signal(64, name=f"lane{k}_frames", attrs=debug) for k in range(n)]
        self.lane_crc = [Signal(32, name=f"lane{k}_crc", attrs=debug) for k in range(n)]
        self.all_ok = Signal(name="all_ok", attrs=debug)

    def _arrays(self):
        tx = TxArray(self.host_bw, codecs=self.codecs, mtu=self.mtu, port=self.port,
                     idle_timeout=self.idle_timeout, max_elements=self.max_host_elements)
        rx = RxArray(self.host_bw, codecs=self.codecs,
                     max_host_elements=self.max_host_elements, port=self.port)
        return tx, rx

    def elaborate(self, platform):
        m = Module()
        if platform is None:
            # simulation: the testbench drives `sync`; no MMCM, no pins
            m.domains.sync = ClockDomain("sync")
        else:
            self._clocking(m, platform)
            # HBM_CATTRIP: constant 0 (squeezenic_hw/platforms/u280.py, HBM_CATTRIP_NOTE)
            m.submodules.cattrip_buf = cattrip = io.Buffer(
                "o", platform.request("hbm_cattrip", 0, dir="-"))
            m.d.comb += cattrip.o.eq(0)

        # ---- generators → TX array → wire → RX array → checkers
        m.submodules.tx = tx = self._tx
        m.submodules.rx = rx = self._rx
        wiring.connect(m, tx.o, rx.i)
        values = config_values(self.config)
        ctrl = tx.ctrl
        m.d.comb += [getattr(ctrl, name).eq(values[name]) for name in _CTRL_FIELDS]
        m.d.comb += [ctrl.n_frames.eq(self.n_frames), tx.close.eq(0)]
        # `start` rises on the first cycle after reset (the run's inputs are constants)
        start = Signal(name="gen_start")
        m.d.sync += start.eq(1)
        m.d.comb += ctrl.start.eq(start)

        # ---- mark_debug registers for the hardware manager
        for k in range(self.n_lanes):
            chk, rxc, txc = rx.checkers[k], rx.rx_counters[k], tx.tx_counters[k]
            healthy = ((chk.frames != 0) & (chk.gaps == 0) & (chk.bypass == 0)
                       & (rxc.bypass_frames == 0) & (rxc.size_errors == 0)
                       & (txc.bypass_frames == 0) & (txc.size_errors == 0))
            m.d.sync += [self.lane_ok[k].eq(healthy), self.lane_frames[k].eq(chk.frames),
                         self.lane_crc[k].eq(chk.crc)]
        m.d.sync += self.all_ok.eq(Cat(*self.lane_ok).all())
        return m

    def _clocking(self, m, platform):
        """100 MHz board clock → MMCM → BUFG → 250 MHz ``sync``, reset until LOCKED."""
        m.submodules.sysclk_buf = sysclk = io.Buffer("i", platform.request("sysclk", 0, dir="-"))
        clk100 = sysclk.i
        clk250_unbuf = Signal(name="mmcm_clkout0")
        feedback = Signal(name="mmcm_feedback")
        locked = Signal(name="mmcm_locked")
        m.submodules.mmcm = Instance(
            "MMCME4_BASE",
            **{f"p_{k}": v for k, v in MMCM_PARAMS.items()},
            i_CLKIN1=clk100, i_CLKFBIN=feedback, o_CLKFBOUT=feedback,
            i_RST=0, i_PWRDWN=0,
            o_CLKOUT0=clk250_unbuf, o_LOCKED=locked)
        m.domains.sync = ClockDomain("sync")
        m.submodules.bufg = Instance("BUFG", i_I=clk250_unbuf, o_O=ClockSignal("sync"))
        # LOCKED is asynchronous to the 250 MHz clock; release reset synchronously
        m.submodules.reset_sync = ResetSynchronizer(~locked, domain="sync")
