"""Wide OR logic built as a tree of LUT-sized pieces, each piece's output a kept net, so
that its LUT depth is what the tree says whichever LUT mapper maps it.

A LUT mapper that maps for area (Yosys's ABC9 maps every cone off the design's deepest
path so) may build a wide AND-OR as a chain as well as a tree: the depth of a 17-way
select then depends on the mapper and the design around it. A net with the ``keep``
attribute is a boundary for Yosys's ABC and ABC9 and for Vivado's synthesis alike, so a
tree of pieces of at most :data:`LUT_INPUTS` inputs, each ending on a kept net, maps to
one LUT per piece: ⌈log₆⌉ levels for any mapper.
"""

from amaranth import Array, Const, Signal

__all__ = ["LUT_INPUTS", "kept", "balanced_or", "or_tree", "mux_tree"]

#: Inputs of the device's LUT (UltraScale+: LUT6).
LUT_INPUTS = 6


def kept(m, value, name):
    """``value`` on a net of its own with the ``keep`` attribute (a LUT boundary)."""
    net = Signal(len(value), name=name, attrs={"keep": 1})
    m.d.comb += net.eq(value)
    return net


def balanced_or(terms):
    """The OR of ``terms`` as a balanced tree of two-input ORs (0 for none), with no kept
    net: its depth grows with log₂ of their number where a chain would grow with the
    number itself, and the mapper may still merge across it (:func:`or_tree` keeps it)."""
    terms = list(terms)
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        terms = [terms[i] | terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def or_tree(m, terms, *, inputs=1, name="or", room=0):
    """The OR of ``terms`` (values of one width; 0 for none), bit for bit, as a tree of
    kept pieces.

    Each term is a function of ``inputs`` signals per bit (2 for ``Mux(sel, data, 0)``).
    Each level packs its items (the terms, then kept pieces of one input each) into
    pieces of at most :data:`LUT_INPUTS` inputs, from the front, until the pieces and
    the items left fit one LUT with ``room`` inputs to spare (for the logic the caller
    puts around the OR); the OR of the last level's items is returned (not kept). 17
    terms of 2 inputs take 7 LUTs in 2 levels, 5 terms 2 LUTs: as few as a chain of
    them would."""
    terms = list(terms)
    if not terms:
        return Const(0, 1)
    if isinstance(inputs, bool) or not isinstance(inputs, int) or \
            not 1 <= inputs <= LUT_INPUTS:
        raise ValueError(f"inputs must be an int 1..{LUT_INPUTS}, got {inputs!r}")
    if isinstance(room, bool) or not isinstance(room, int) or \
            not 0 <= room <= LUT_INPUTS - 2:
        raise ValueError(f"room must be an int 0..{LUT_INPUTS - 2}, got {room!r}")
    fits = LUT_INPUTS - room
    items = [(term, inputs) for term in terms]
    level = 0
    while sum(cost for _, cost in items) > fits:
        # pieces from the front until they (one input each) and the items left fit the
        # root, or the level is all pieces
        pieces, rest = [], items
        while rest and len(pieces) + sum(cost for _, cost in rest) > fits:
            group, used = [], 0
            while rest and used + rest[0][1] <= LUT_INPUTS:
                used += rest[0][1]
                group.append(rest[0])
                rest = rest[1:]
            if len(group) == 1 and group[0][1] == 1:
                pieces.append(group[0])     # a net already: nothing to pack it with
                continue
            piece = group[0][0]
            for value, _ in group[1:]:
                piece = piece | value
            pieces.append((kept(m, piece, f"{name}_l{level}_{len(pieces)}"), 1))
        items, level = pieces + rest, level + 1
    result = items[0][0]
    for value, _ in items[1:]:
        result = result | value
    return result


def _is_zero(value):
    return isinstance(value, Const) and value.value == 0


def mux_tree(m, select, data, *, name="mux"):
    """``data[select]``, 0 where ``select`` is past ``data``, as a tree of 4:1 pieces (two
    bits of ``select`` and four of ``data`` per bit: one LUT6), each kept.

    The levels take ``select``'s bits from the lowest, two at a time (one for a last odd
    bit); a piece whose inputs are all 0 is the constant."""
    terms = list(data)
    if not terms:
        raise ValueError("data must hold at least one value")
    width = max(len(t) for t in terms)
    if len(terms) > 1 << len(select):
        raise ValueError(f"data has {len(terms)} values, more than select's "
                         f"{1 << len(select)}")
    zero = Const(0, width)
    lo, level = 0, 0
    while lo < len(select):
        live = sum(1 for t in terms if not _is_zero(t))
        if live + len(select) - lo <= LUT_INPUTS:      # the rest is one LUT
            return Array(terms + [zero] * ((1 << len(select) - lo) - len(terms)))[select[lo:]]
        step = min(2, len(select) - lo)
        group = 1 << step
        bits = select[lo:lo + step]
        pieces = []
        for k in range(0, len(terms), group):
            chunk = terms[k:k + group]
            if all(_is_zero(t) for t in chunk):
                pieces.append(zero)
                continue
            chunk += [zero] * (group - len(chunk))
            piece = Array(chunk)[bits]
            last = lo + step >= len(select)
            pieces.append(piece if last else kept(m, piece, f"{name}_l{level}_{k // group}"))
        terms, lo, level = pieces, lo + step, level + 1
    return terms[0]
