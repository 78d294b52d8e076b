"""What moves between the narrow lane's stages: items, header fields, tokens, and
the header bytes of the coalescing key."""

from amaranth import Cat, Const, unsigned
from amaranth.lib import data

from squeezenic_hw.spec.header import HDR

#: Header bytes that make the coalescing key (docs/wire-format.md section 6): MACs, IPv4
#: addresses, UDP ports, codec, parameter, scale, aux, seed; and the flags' stochastic bit.
KEY_BYTES = [(0, 12), (HDR.SRC_IP[0], 12), (HDR.CODEC[0], 2), (HDR.SCALE[0], 12)]
#: Header bytes that may differ between the host frames of one wire frame and are copied
#: from its first one: TOS, identification, flags/fragment offset, TTL.
COPIED_BYTES = [HDR.IP_TOS[0]] + list(range(HDR.IP_ID[0], HDR.IP_TTL[0] + 1))


class Kind:
    """What an item is: a header, or a payload beat's codes."""
    HEADER = 0
    PAYLOAD = 1


def item_layout(word):
    """One input beat, reduced."""
    return data.StructLayout({
        "kind": unsigned(1),
        "bits": unsigned(word),    # payload: codes of elements 0…k-1, zero above
        "k": unsigned(5),          # payload: elements in the beat, 1…16
        "last": unsigned(1),       # payload: the host frame's last beat
    })


class HostFields(data.Struct):
    """What a wire frame takes from the host frame it starts in."""
    copied: unsigned(8 * len(COPIED_BYTES))
    src: unsigned(16)
    dst: unsigned(16)


class HeaderFields(data.Struct):
    """A header's fields and compares, for the gearbox."""
    n: unsigned(16)
    offset: unsigned(32)
    flush: unsigned(1)
    host: HostFields
    coalesce: unsigned(1)      # same key, contiguous offset
    key_new: unsigned(1)       # a key other than the header's before
    idle: unsigned(1)          # idle_timeout or more cycles after the last


class Token(data.Struct):
    """A closed wire frame (``frame``), or the point where the key changes (``switch``
    with ``frame`` = 0), in output order."""
    frame: unsigned(1)
    switch: unsigned(1)        # after this frame's header, the output takes the new key
    flush: unsigned(1)
    n: unsigned(16)
    offset: unsigned(32)
    host: HostFields
    rows: unsigned(8)          # payload beats
    last_bytes: unsigned(6)    # bytes in the last payload beat, minus one
    size: unsigned(16)
    ip_sum: unsigned(19)       # the token's IPv4 header words, summed (not folded)


#: Bits of a token, and where its host fields begin.
TOKEN_BITS = data.Layout.cast(Token).size
HOST_OFFSET = data.Layout.cast(Token)["host"].offset


def thermometer(count, width):
    """``width`` bits, bit ``e`` set when ``e < count`` (a constant 0 where ``count``
    cannot exceed ``e``)."""
    top = 2 ** len(count) - 1
    return Cat(*[count > e if e < top else Const(0, 1) for e in range(width)])


def spread(mask, b):
    """Each bit of ``mask`` ``b`` times: an element mask as a mask of code bits."""
    return Cat(*[bit.replicate(b) for bit in mask]) if b > 1 else mask
