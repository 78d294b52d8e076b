"""Register-map model of the OpenNIC user plugin's AXI-Lite register space.

A :class:`RegisterMap` is an ordered list of 32-bit-word :class:`Register`\\ s. It is
the single source of truth for the gateware
(:class:`~squeezenic_hw.gateware.axil.register_file.AxiLiteRegisterFile` builds its
decoder and ports from it) and for software (:meth:`RegisterMap.to_json`,
:meth:`RegisterMap.to_c_header`, :meth:`RegisterMap.to_markdown`).

Access kinds
------------
``"ro"``
    Hardware drives the value; software writes are accepted (``OKAY``) and ignored.
``"rw"``
    Software writes, hardware reads; reads return the value last written (``reset``
    after reset). Bits above ``width`` are dropped on write and read as 0.
``"w1p"``
    Write-1 pulse: a write produces, for exactly one clock cycle, a pulse carrying the
    written bits (``wdata[width-1:0]``); reads return 0.

64-bit counters
---------------
:meth:`RegisterMap.add_counter64` adds two ``ro`` registers, ``<name>_lo`` (bits
31:0) at offset ``o`` and ``<name>_hi`` (bits 63:32) at ``o + 4``. Hardware supplies
one 64-bit value. Reading ``_lo`` snapshots the upper half in the same cycle, and
reading ``_hi`` returns that snapshot, so software that reads ``_lo`` then ``_hi``
gets one consistent 64-bit value even while the counter runs. Reading ``_hi`` alone
returns whatever the last ``_lo`` read captured (0 after reset).

Addresses
---------
Offsets are byte addresses, multiples of 4. The register space is :attr:`RegisterMap.size`
bytes: the smallest power of two (at least 4) that covers the highest register. The
hardware decodes only ``log2(size)`` address bits and answers ``SLVERR`` to anything
outside the map (gaps included).
"""

import json
import re
from dataclasses import dataclass

__all__ = ["ACCESS_KINDS", "Register", "RegisterMap"]

#: Register access kinds (see the module docstring).
ACCESS_KINDS = ("ro", "rw", "w1p")

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Names the C header defines itself (after the prefix).
_RESERVED_C_NAMES = {"REG_SPACE_SIZE"}
_ADDRESS_LIMIT = 1 << 32


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Register:
    """One 32-bit register word.

    Parameters
    ----------
    name : str
        C identifier (letters, digits, ``_``; starts with a letter). Names are unique
        in a map ignoring case, since the C header upper-cases them.
    offset : int
        Byte address, a multiple of 4, below 2**32.
    width : int
        Implemented bits, 1..32 (bits ``width-1 .. 0`` of the word).
    access : str
        ``"ro"``, ``"rw"`` or ``"w1p"``.
    reset : int
        Value after reset; ``rw`` only (must be 0 otherwise) and must fit ``width``.
    doc : str
        One-line description.
    group : str
        Grouping for documentation, e.g. ``"global"`` or ``"lane0.tx"``.
    counter64 : str or None
        Set by :meth:`RegisterMap.add_counter64`: the 64-bit counter this word is half of.
    """
    name: str
    offset: int
    width: int = 32
    access: str = "rw"
    reset: int = 0
    doc: str = ""
    group: str = ""
    counter64: str | None = None

    def __post_init__(self):
        _check_name(self.name, "name")
        where = f"register {self.name!r}"
        if not _is_int(self.offset) or not 0 <= self.offset < _ADDRESS_LIMIT:
            raise ValueError(f"{where}: offset {self.offset!r} is not a byte address "
                             "in 0..2**32-1")
        if self.offset % 4:
            raise ValueError(f"{where}: offset 0x{self.offset:x} is not a multiple of 4")
        if not _is_int(self.width) or not 1 <= self.width <= 32:
            raise ValueError(f"{where}: width {self.width!r} is not in 1..32")
        if self.access not in ACCESS_KINDS:
            raise ValueError(f"{where}: access {self.access!r} is not one of {ACCESS_KINDS}")
        if not _is_int(self.reset):
            raise ValueError(f"{where}: reset {self.reset!r} is not an int")
        if self.access != "rw" and self.reset != 0:
            raise ValueError(f"{where}: reset {self.reset:#x} given for a {self.access!r} "
                             "register (only 'rw' registers have a reset value)")
        if not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"{where}: reset {self.reset:#x} does not fit in "
                             f"width {self.width}")
        if not isinstance(self.doc, str):
            raise ValueError(f"{where}: doc must be a str")
        if not isinstance(self.group, str):
            raise ValueError(f"{where}: group must be a str")
        if self.counter64 is not None:
            if self.access != "ro" or self.width != 32:
                raise ValueError(f"{where}: counter64 halves must be 32-bit 'ro' registers")

    @property
    def mask(self):
        return (1 << self.width) - 1

    def to_dict(self):
        """The register's JSON record (stable keys)."""
        return {"name": self.name, "offset": self.offset, "width": self.width,
                "access": self.access, "reset": self.reset, "doc": self.doc,
                "group": self.group}


class RegisterMap:
    """An ordered, validated collection of :class:`Register`\\ s.

    Registers keep the order they were added in (the order of every emitted file
    and of the gateware's port fields). Every addition is validated at once and
    raises ``ValueError`` naming the offending parameter and register.

    Lookup: ``regmap["name"]``, ``"name" in regmap``, ``regmap.get(name)``,
    ``regmap.at(offset)``; iteration yields registers in order.
    """

    def __init__(self, registers=()):
        self._registers = []
        self._by_name = {}        # exact name -> Register
        self._by_upper = {}       # upper-cased name -> Register (C header names)
        self._by_offset = {}
        self._counters = {}       # counter name -> (lo, hi), in order
        for register in registers:
            self.add(register)

    # -- building ---------------------------------------------------------------------

    def add(self, name, *, access=None, offset=None, width=32, reset=0, doc="", group=""):
        """Add a register and return it.

        ``name`` may also be a ready :class:`Register` (then no other argument may be
        given). ``access`` is required otherwise. When ``offset`` is omitted the
        register goes one word past the highest offset used so far (0 for the first).
        """
        if isinstance(name, Register):
            given = (access, offset, width, reset, doc, group) != (None, None, 32, 0, "", "")
            if given:
                raise ValueError("add: give either a Register or its fields, not both")
            register = name
            if register.counter64 is not None:
                raise ValueError(f"register {register.name!r}: add counter halves with "
                                 "add_counter64")
        else:
            if access is None:
                raise ValueError(f"register {name!r}: access is required "
                                 f"(one of {ACCESS_KINDS})")
            if offset is None:
                offset = self.next_offset
            register = Register(name=name, offset=offset, width=width, access=access,
                                reset=reset, doc=doc, group=group)
        self._check_new(register)
        self._insert(register)
        return register

    def add_counter64(self, name, doc="", group="", *, offset=None):
        """Add a 64-bit ``ro`` counter as ``<name>_lo`` (offset ``o``) and ``<name>_hi``
        (``o + 4``); returns ``(lo, hi)``.

        Reading ``_lo`` snapshots ``_hi`` in the same cycle, so reading ``_lo`` then
        ``_hi`` is atomic. The gateware takes the counter as one 64-bit ``ro`` field
        named ``name``.
        """
        _check_name(name, "counter name")
        if offset is None:
            offset = self.next_offset
        if not _is_int(offset) or offset + 4 >= _ADDRESS_LIMIT:
            raise ValueError(f"counter {name!r}: offset {offset!r} leaves no room for _hi")
        doc_sep = f"{doc} " if doc else ""
        lo = Register(name=f"{name}_lo", offset=offset, width=32, access="ro",
                      doc=f"{doc_sep}(bits 31:0 of 64-bit counter {name}; reading it "
                          f"snapshots {name}_hi)",
                      group=group, counter64=name)
        hi = Register(name=f"{name}_hi", offset=offset + 4, width=32, access="ro",
                      doc=f"{doc_sep}(bits 63:32 of 64-bit counter {name}, as snapshotted "
                          f"by the last read of {name}_lo)",
                      group=group, counter64=name)
        self._check_counter_name(name)
        self._check_new(lo)
        self._check_new(hi)
        self._insert(lo)
        self._insert(hi)
        self._counters[name] = (lo, hi)
        return lo, hi

    def _check_counter_name(self, name):
        if name.upper() in self._by_upper:
            raise ValueError(f"counter {name!r}: name clashes with register "
                             f"{self._by_upper[name.upper()].name!r}")
        for other in self._counters:
            if other.upper() == name.upper():
                raise ValueError(f"counter {name!r}: duplicate counter name "
                                 f"(already {other!r})")

    def _check_new(self, register):
        upper = register.name.upper()
        where = f"register {register.name!r}"
        if upper in self._by_upper:
            raise ValueError(f"{where}: duplicate name (already "
                             f"{self._by_upper[upper].name!r} at "
                             f"0x{self._by_upper[upper].offset:x})")
        if upper in _RESERVED_C_NAMES:
            raise ValueError(f"{where}: name is reserved for the C header")
        # Counters occupy their own name as a gateware port field.
        for counter in self._counters:
            if counter.upper() == upper:
                raise ValueError(f"{where}: name clashes with 64-bit counter {counter!r}")
        if register.offset in self._by_offset:
            raise ValueError(f"{where}: offset 0x{register.offset:x} already used by "
                             f"{self._by_offset[register.offset].name!r}")

    def _insert(self, register):
        self._registers.append(register)
        self._by_name[register.name] = register
        self._by_upper[register.name.upper()] = register
        self._by_offset[register.offset] = register

    def validate(self):
        """Re-check the whole map (every addition is checked already); also refuses an
        empty map, which has nothing to build."""
        if not self._registers:
            raise ValueError("regmap: has no registers")
        fresh = RegisterMap()
        for r in self._registers:
            if r.counter64 is not None and r.counter64 not in fresh._counters:
                lo, hi = self._counters[r.counter64]
                if hi.offset != lo.offset + 4:
                    raise ValueError(f"counter {r.counter64!r}: _hi is not at _lo + 4")
                fresh._check_counter_name(r.counter64)
                fresh._counters[r.counter64] = (lo, hi)
            fresh._check_new(r)
            fresh._insert(r)

    # -- lookup -----------------------------------------------------------------------

    def __len__(self):
        return len(self._registers)

    def __iter__(self):
        return iter(self._registers)

    def __contains__(self, name):
        return name in self._by_name

    def __getitem__(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no register named {name!r}") from None

    def get(self, name, default=None):
        return self._by_name.get(name, default)

    def at(self, offset):
        """The register at byte ``offset``, or ``None``."""
        return self._by_offset.get(offset)

    @property
    def registers(self):
        return list(self._registers)

    @property
    def counters(self):
        """``{name: (lo, hi)}`` of the 64-bit counters, in order."""
        return dict(self._counters)

    @property
    def next_offset(self):
        """Offset :meth:`add` assigns when none is given: one word past the highest."""
        return max(self._by_offset, default=-4) + 4

    @property
    def size(self):
        """Bytes of register space: the smallest power of two >= 4 covering every register."""
        end = max(self._by_offset, default=0) + 4
        return max(4, 1 << (end - 1).bit_length())

    @property
    def address_bits(self):
        """Low address bits the hardware decodes (``log2(size)``)."""
        return self.size.bit_length() - 1

    # -- emission ---------------------------------------------------------------------

    def to_dict(self):
        return {"version": 1,
                "registers": [r.to_dict() for r in self._registers],
                "size": self.size}

    def to_json(self, indent=2):
        """JSON text: ``{"version": 1, "registers": [...], "size": bytes}``."""
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def to_c_header(self, prefix="SQZ"):
        """C header with ``#define <PREFIX>_<NAME> 0x...u`` byte offsets."""
        if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
            raise ValueError(f"prefix: {prefix!r} is not a C identifier")
        prefix = prefix.upper()
        guard = f"{prefix}_REGS_H"
        digits = max(4, (self.size - 1).bit_length() + 3 >> 2)
        width = max((len(r.name) for r in self._registers), default=0) + len(prefix) + 1
        lines = [
            "/* Generated by squeezenic_hw.regmap.registers -- do not edit. */",
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            "/* Byte offsets of the AXI-Lite registers (32-bit words). Reading a counter's",
            " * _lo word snapshots its _hi word: read _lo first, then _hi. */",
        ]
        group = None
        for r in self._registers:
            if r.group != group:
                group = r.group
                lines += ["", f"/* -- {_c_comment(group or '(no group)')} -- */"]
            reset = f", reset 0x{r.reset:x}" if r.access == "rw" else ""
            note = f"{r.access}, {r.width} bit{'s' if r.width != 1 else ''}{reset}"
            if r.doc:
                note += f": {_one_line(r.doc)}"
            lines.append(f"/* {_c_comment(note)} */")
            macro = f"{prefix}_{r.name.upper()}"
            lines.append(f"#define {macro:<{width}} 0x{r.offset:0{digits}x}u")
        lines += ["", f"#define {prefix}_REG_SPACE_SIZE 0x{self.size:x}u", "",
                  f"#endif /* {guard} */", ""]
        return "\n".join(lines)

    def to_markdown(self):
        """A Markdown table of the map (offset, name, access, width, reset, group, doc)."""
        lines = ["| Offset | Name | Access | Width | Reset | Group | Description |",
                 "|---:|---|---|---:|---:|---|---|"]
        for r in self._registers:
            reset = f"0x{r.reset:x}" if r.access == "rw" else ""
            lines.append(f"| 0x{r.offset:04x} | `{r.name}` | {r.access} | {r.width} | {reset} "
                         f"| {_md(r.group)} | {_md(r.doc)} |")
        lines.append("")
        lines.append(f"Register space: 0x{self.size:x} bytes. Unmapped addresses answer SLVERR. "
                     "Reading a counter's `_lo` word snapshots its `_hi` word.")
        return "\n".join(lines) + "\n"


def _check_name(name, what):
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"{what}: {name!r} is not a valid register name "
                         "(a C identifier starting with a letter)")


def _one_line(text):
    return " ".join(text.split())


def _c_comment(text):
    # A "*/" inside the text would end the comment early.
    return _one_line(text).replace("*/", "* /")


def _md(text):
    return _one_line(text).replace("|", "\\|")
