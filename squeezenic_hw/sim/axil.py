"""AXI-Lite master helpers for Amaranth async testbenches, and a register-file model.

:func:`axil_write` and :func:`axil_read` drive one transaction on the master side of
an :func:`~squeezenic_hw.gateware.axil.bus.AxiLiteSignature` bus (the ``axil`` port of
a slave, or the ``s`` port of a bridge) and return its response. Optional seeded
random delays shift ``awvalid`` against ``wvalid`` (either may come first, or both
together) and hold ``bready``/``rready`` low for a while after the response
appears. On the way they check the slave's side of the protocol: no response
before its request is complete, ``*valid`` and payload held until the handshake, no
stray response. A transaction that does not finish within ``timeout`` cycles raises
``AssertionError`` instead of hanging the simulation.

Cycle numbers in ``timing`` count clock edges of ``domain`` from the call: index 0
is the cycle in progress when the helper is called.

:class:`AxiLiteRegisterModel` is the Python model of
:class:`~squeezenic_hw.gateware.axil.register_file.AxiLiteRegisterFile` that the
tests compare against; :class:`MovingRoFields` drives a register file's ``ro``
inputs from a cycle counter so that reads can be checked against known values.
"""

import random

from amaranth import Cat

from squeezenic_hw.gateware.axil.bus import AxiResp

__all__ = ["OKAY", "SLVERR", "DEFAULT_TIMEOUT", "axil_write", "axil_read",
           "AxiLiteRegisterModel", "MovingRoFields"]

OKAY = AxiResp.OKAY.value
SLVERR = AxiResp.SLVERR.value

#: Cycles a transaction may take, beyond its own random delays, before it fails.
DEFAULT_TIMEOUT = 1000


def _delay(explicit, rng, max_delay):
    if explicit is not None:
        return explicit
    if rng is None or max_delay <= 0:
        return 0
    return rng.randint(0, max_delay)


async def axil_write(ctx, bus, addr, data, *, rng=None, max_delay=0, aw_delay=None,
                     w_delay=None, bready_delay=None, domain="sync", timeout=None,
                     timing=None):
    """Write ``data`` to ``addr``; returns ``bresp``.

    Parameters
    ----------
    rng : random.Random or None
        Source of the random delays (none without it).
    max_delay : int
        Each random delay is uniform in ``0..max_delay`` cycles: before ``awvalid``,
        before ``wvalid`` (independently, so ``w`` may come first), and how long
        ``bready`` stays low once ``bvalid`` is seen.
    aw_delay, w_delay, bready_delay : int or None
        Fixed delays that override the random ones.
    domain : str
        Clock domain of ``bus``.
    timeout : int or None
        Cycle limit (default :data:`DEFAULT_TIMEOUT` plus the delays).
    timing : dict or None
        If given, receives the cycle indices ``"aw"``, ``"w"`` (handshakes),
        ``"bvalid"`` (first cycle of ``bvalid``) and ``"b"`` (response handshake).
    """
    aw_d = _delay(aw_delay, rng, max_delay)
    w_d = _delay(w_delay, rng, max_delay)
    b_d = _delay(bready_delay, rng, max_delay)
    if timeout is None:
        timeout = DEFAULT_TIMEOUT + aw_d + w_d + b_d
    what = f"axil_write(0x{addr:08x}) in domain {domain!r}"
    times = {} if timing is None else timing
    times.clear()
    if ctx.get(bus.bvalid):
        raise AssertionError(f"{what}: bvalid already high before the request (stray response)")
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, data)
    b_seen = 0
    b_first = None
    t = 0
    while True:
        aw_on = "aw" not in times and t >= aw_d
        w_on = "w" not in times and t >= w_d
        b_on = b_seen >= b_d
        ctx.set(bus.awvalid, aw_on)
        ctx.set(bus.wvalid, w_on)
        ctx.set(bus.bready, b_on)
        _, _, awready, wready, bvalid, bresp = await ctx.tick(domain).sample(
            bus.awready, bus.wready, bus.bvalid, bus.bresp)
        if bvalid:
            if "aw" not in times or "w" not in times:
                raise AssertionError(f"{what}: bvalid in cycle {t} before both aw and w "
                                     f"handshakes (aw at {times.get('aw')}, "
                                     f"w at {times.get('w')})")
            if b_first is None:
                b_first = bresp
                times["bvalid"] = t
            elif bresp != b_first:
                raise AssertionError(f"{what}: bresp changed from {b_first} to {bresp} "
                                     "while bready was low")
            b_seen += 1
        elif b_seen:
            raise AssertionError(f"{what}: bvalid dropped in cycle {t} without a handshake")
        if aw_on and awready:
            times["aw"] = t
        if w_on and wready:
            times["w"] = t
        if b_on and bvalid:
            times["b"] = t
            ctx.set(bus.awvalid, 0)
            ctx.set(bus.wvalid, 0)
            ctx.set(bus.bready, 0)
            return bresp
        t += 1
        if t > timeout:
            missing = [name for name in ("aw", "w", "bvalid") if name not in times]
            raise AssertionError(f"{what}: timed out after {timeout} cycles "
                                 f"waiting for {', '.join(missing)} (handshakes so far: "
                                 f"{times})")


async def axil_read(ctx, bus, addr, *, rng=None, max_delay=0, ar_delay=None,
                    rready_delay=None, domain="sync", timeout=None, timing=None):
    """Read ``addr``; returns ``(rdata, rresp)``.

    Parameters are those of :func:`axil_write`, with ``ar_delay`` (before
    ``arvalid``) and ``rready_delay`` (cycles ``rready`` stays low once ``rvalid`` is
    seen). ``timing`` receives ``"ar"``, ``"rvalid"`` and ``"r"``.
    """
    ar_d = _delay(ar_delay, rng, max_delay)
    r_d = _delay(rready_delay, rng, max_delay)
    if timeout is None:
        timeout = DEFAULT_TIMEOUT + ar_d + r_d
    what = f"axil_read(0x{addr:08x}) in domain {domain!r}"
    times = {} if timing is None else timing
    times.clear()
    if ctx.get(bus.rvalid):
        raise AssertionError(f"{what}: rvalid already high before the request (stray response)")
    ctx.set(bus.araddr, addr)
    r_seen = 0
    r_first = None
    t = 0
    while True:
        ar_on = "ar" not in times and t >= ar_d
        r_on = r_seen >= r_d
        ctx.set(bus.arvalid, ar_on)
        ctx.set(bus.rready, r_on)
        _, _, arready, rvalid, rdata, rresp = await ctx.tick(domain).sample(
            bus.arready, bus.rvalid, bus.rdata, bus.rresp)
        if rvalid:
            if "ar" not in times:
                raise AssertionError(f"{what}: rvalid in cycle {t} before the ar handshake")
            if r_first is None:
                r_first = (rdata, rresp)
                times["rvalid"] = t
            elif (rdata, rresp) != r_first:
                raise AssertionError(f"{what}: (rdata, rresp) changed from {r_first} to "
                                     f"{(rdata, rresp)} while rready was low")
            r_seen += 1
        elif r_seen:
            raise AssertionError(f"{what}: rvalid dropped in cycle {t} without a handshake")
        if ar_on and arready:
            times["ar"] = t
        if r_on and rvalid:
            times["r"] = t
            ctx.set(bus.arvalid, 0)
            ctx.set(bus.rready, 0)
            return rdata, rresp
        t += 1
        if t > timeout:
            missing = [name for name in ("ar", "rvalid") if name not in times]
            raise AssertionError(f"{what}: timed out after {timeout} cycles "
                                 f"waiting for {', '.join(missing)} (handshakes so far: "
                                 f"{times})")


class AxiLiteRegisterModel:
    """What software sees of an ``AxiLiteRegisterFile`` built from ``regmap``.

    ``ro`` values are supplied per read: a callable ``ro(field)`` (or a mapping)
    giving the value of the ``ro`` port field (a counter's name for its 64 bits) in
    the cycle the hardware samples it.
    """

    def __init__(self, regmap):
        self.regmap = regmap
        self.rw = {r.name: r.reset for r in regmap if r.access == "rw"}
        self.snapshots = {name: 0 for name in regmap.counters}

    def decode(self, addr):
        """The register ``addr`` selects, or ``None`` (the answer is then SLVERR)."""
        if addr >> self.regmap.address_bits:
            return None
        return self.regmap.at(addr & ~3)

    def write(self, addr, data):
        """Apply a write; returns ``(bresp, pulse)``, ``pulse`` a ``(name, bits)`` or None."""
        reg = self.decode(addr)
        if reg is None:
            return SLVERR, None
        if reg.access == "rw":
            self.rw[reg.name] = data & reg.mask
        elif reg.access == "w1p":
            return OKAY, (reg.name, data & reg.mask)
        return OKAY, None

    def read(self, addr, ro, *, update=True):
        """Returns ``(rdata, rresp)``; ``update=False`` leaves the ``_hi`` snapshots alone."""
        get = ro if callable(ro) else ro.__getitem__
        reg = self.decode(addr)
        if reg is None:
            return 0, SLVERR
        if reg.access == "rw":
            return self.rw[reg.name], OKAY
        if reg.access == "w1p":
            return 0, OKAY
        if reg.counter64 is None:
            return get(reg.name) & reg.mask, OKAY
        lo, _hi = self.regmap.counters[reg.counter64]
        if reg is lo:
            value = get(reg.counter64)
            if update:
                self.snapshots[reg.counter64] = (value >> 32) & 0xFFFF_FFFF
            return value & 0xFFFF_FFFF, OKAY
        return self.snapshots[reg.counter64], OKAY


class MovingRoFields:
    """``ro`` inputs of a register file that change every cycle, with known values.

    Field ``f`` of width ``w`` is ``cnt + c_f`` (mod ``2**w``) in the cycle where the
    counter ``cnt`` equals ``cycle``; a 64-bit field is the low 32 counter bits
    twice, plus ``c_f``, so that its two halves differ. ``c_f`` are seeded random
    constants.

    Parameters
    ----------
    ro_fields : dict
        ``{name: width}`` of the register file (``AxiLiteRegisterFile.ro_fields``).
    seed : int
    """

    def __init__(self, ro_fields, *, seed=0):
        self.ro_fields = dict(ro_fields)
        rng = random.Random(seed)
        self.ro_const = {name: rng.getrandbits(64) for name in self.ro_fields}

    def value(self, field, cycle):
        """The field's value in the cycle where the counter equals ``cycle``."""
        width = self.ro_fields[field]
        c = cycle & 0xFFFF_FFFF
        if width == 64:
            return ((c << 32 | c) + self.ro_const[field]) & ((1 << 64) - 1)
        return (cycle + self.ro_const[field]) & ((1 << width) - 1)

    def drive(self, m, ro, cnt):
        """Drive the register file's ``ro`` port (its fields) from the 64-bit ``cnt``."""
        for name, width in self.ro_fields.items():
            const = self.ro_const[name]
            if width == 64:
                value = Cat(cnt[:32], cnt[:32]) + const
            else:
                value = cnt + (const & ((1 << width) - 1))
            m.d.comb += getattr(ro, name).eq(value[:width])
