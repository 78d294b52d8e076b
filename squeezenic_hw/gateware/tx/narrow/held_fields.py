"""The header fields a trusted source holds constant (``constant_fields``): checked,
left out of the token FIFO, and put back."""

from amaranth import Cat, Const
from amaranth.lib import data

from squeezenic_hw.spec.header import HDR

from .layouts import COPIED_BYTES, TOKEN_BITS, HostFields, Token

# Key fields a source may hold constant (``constant_fields``): their header bytes, and
# whether the value is ``bytes`` (addresses, as in ``Header``) or an int (big-endian).
_KEY_FIELDS = {"dst_mac": (HDR.DST_MAC, bytes), "src_mac": (HDR.SRC_MAC, bytes),
               "src_ip": (HDR.SRC_IP, bytes), "dst_ip": (HDR.DST_IP, bytes),
               "dst_port": (HDR.UDP_DST, int)}


def constant_key_bytes(fields):
    """``{header byte: value}`` of the key fields ``fields`` (``constant_fields``) fix."""
    out = {}
    for name, value in (fields or {}).items():
        if name not in _KEY_FIELDS:
            continue
        (start, length), kind = _KEY_FIELDS[name]
        if kind is bytes:
            if not isinstance(value, bytes) or len(value) != length:
                raise ValueError(f"constant_fields[{name!r}] must be {length} bytes, "
                                 f"got {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value < 1 << 8 * length:
                raise ValueError(f"constant_fields[{name!r}] must be an int of "
                                 f"{8 * length} bits, got {value!r}")
            value = value.to_bytes(length, "big")
        out.update({start + i: byte for i, byte in enumerate(value)})
    return out


def _token_field_bits():
    """Where the fields a source may hold constant sit in a token: {name: [(start bit,
    width, shift of the field's value that gives those bits)]}."""
    layout = data.Layout.cast(Token)
    host = layout["host"].offset
    host_layout = data.Layout.cast(HostFields)
    copied = host + host_layout["copied"].offset
    byte = {b: copied + 8 * i for i, b in enumerate(COPIED_BYTES)}
    return {
        "ip_tos": [(byte[HDR.IP_TOS[0]], 8, 0)],
        "ip_frag": [(byte[HDR.IP_FRAG[0]], 8, 8), (byte[HDR.IP_FRAG[0] + 1], 8, 0)],
        "ttl": [(byte[HDR.IP_TTL[0]], 8, 0)],
        "tuser_dst": [(host + host_layout["dst"].offset, 16, 0)],
    }


_TOKEN_FIELD_BITS = _token_field_bits()
_FIELD_WIDTHS = {name: sum(n for _, n, _ in spots) for name, spots in _TOKEN_FIELD_BITS.items()}


def constant_token_bits(fields):
    """``[(start bit, Const)]`` of the token bits ``fields`` (``constant_fields``) fix,
    in order."""
    if fields is None:
        return []
    names = [*_FIELD_WIDTHS, *_KEY_FIELDS]
    if not isinstance(fields, dict) or not set(fields) <= set(names):
        raise ValueError(f"constant_fields must be a dict of {', '.join(names)}, "
                         f"got {fields!r}")
    out = []
    for name, value in fields.items():
        if name in _KEY_FIELDS:
            continue
        width = _FIELD_WIDTHS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << width:
            raise ValueError(f"constant_fields[{name!r}] must be an int of {width} bits, "
                             f"got {value!r}")
        out += [(start, Const(value >> shift & (1 << n) - 1, n))
                for start, n, shift in _TOKEN_FIELD_BITS[name]]
    return sorted(out, key=lambda item: item[0])


def held(value, constants, offset):
    """``value``, the token's bits from ``offset`` on, with the bits ``constants`` fix
    there put in."""
    parts, at = [], 0
    for start, fixed in constants:
        if 0 <= start - offset < len(value):
            parts += [value[at:start - offset], fixed]
            at = start - offset + len(fixed)
    return Cat(*parts, value[at:])


def pack(token, constants):
    """``token``'s bits less those ``constants`` fix."""
    parts, at = [], 0
    for start, value in constants:
        parts.append(token[at:start])
        at = start + len(value)
    return Cat(*parts, token[at:])


def unpack(bits, constants):
    """A token from :func:`pack`'s bits, the fixed bits put back."""
    parts, at, taken = [], 0, 0
    for start, value in constants:
        parts += [bits[taken:taken + start - at], value]
        taken += start - at
        at = start + len(value)
    return Cat(*parts, bits[taken:taken + TOKEN_BITS - at])
