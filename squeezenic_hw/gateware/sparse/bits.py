"""Small counts as plain gates, for the sparse blocks: adders, popcounts and prefix counts
of a few bits that ABC maps into a few LUT levels.

Yosys maps every ``+`` to a ``CARRY4`` chain, however narrow; the counts of at most 16
bits here are better left to ABC, which maps whole cones into LUTs.
"""

from amaranth import Array, Cat, Const, Signal

__all__ = ["add_bits", "const_bits", "named", "or_all", "popcount_table", "popcount16",
           "count_onehot", "combine_onehot", "prefix_counts16", "shift_right_by4"]

_GROUP = 4      # elements per group of a popcount


def add_bits(a, b, carry=None):
    """Sum of two little-endian bit lists, one bit wider, as plain gates."""
    n = max(len(a), len(b))
    a = list(a) + [Const(0, 1)] * (n - len(a))
    b = list(b) + [Const(0, 1)] * (n - len(b))
    out = []
    for x, y in zip(a, b, strict=True):
        if carry is None:
            out.append(x ^ y)
            carry = x & y
        else:
            out.append(x ^ y ^ carry)
            carry = (x & y) | (carry & (x ^ y))
    return out + [Const(0, 1) if carry is None else carry]


def const_bits(value, width):
    """``value`` as a little-endian list of ``width`` constant bits."""
    return [Const((value >> k) & 1, 1) for k in range(width)]


def named(m, bits, name):
    """A comb signal holding ``bits``: shared logic is then built (and simulated) once."""
    sig = Signal(len(bits), name=name)
    m.d.comb += sig.eq(Cat(*bits))
    return [sig[k] for k in range(len(bits))]


def or_all(terms):
    """OR of ``terms`` as a balanced tree."""
    while len(terms) > 1:
        terms = [terms[k] | terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


def popcount_table(m, bits, name):
    """Popcount of a few bits (a LUT per output bit), as a comb signal holding a table of
    the bits; returns its little-endian bits. A chain of :func:`add_bits` would compute
    the same, but each of its sums reads the one before twice, and Amaranth's simulator
    evaluates an unnamed expression at every read."""
    sig = Signal(len(bits).bit_length(), name=name)
    with m.Switch(Cat(*bits)):
        for pattern in range(1 << len(bits)):
            with m.Case(pattern):
                m.d.comb += sig.eq(pattern.bit_count())
    return [sig[k] for k in range(len(sig))]


def popcount16(m, bits, name):
    """5-bit popcount of 16 bits: counts of groups of 4 (one LUT per bit), pairwise
    sums (six inputs per bit), and their sum."""
    groups = [popcount_table(m, bits[g:g + _GROUP], f"{name}_group{g // _GROUP}")
              for g in range(0, 16, _GROUP)]
    pairs = [named(m, add_bits(groups[0], groups[1]), f"{name}_lo"),
             named(m, add_bits(groups[2], groups[3]), f"{name}_hi")]
    return Cat(*add_bits(pairs[0], pairs[1])[:5])


def prefix_counts16(m, bits, name):
    """Ranks (set bits below each position, 4 bits) of 16 bits, and their total (5 bits).

    Two levels: counts within groups of 4, then the counts of the earlier groups.
    """
    groups = [bits[g:g + _GROUP] for g in range(0, 16, _GROUP)]
    local = []      # within a group: 0, b0, b0+b1, b0+b1+b2, and the group's count
    for g, (b0, b1, b2, _) in enumerate(groups):
        s01 = add_bits([b0], [b1])
        local.append([[], [b0], s01, add_bits(s01, [b2])[:2],
                      popcount_table(m, groups[g], f"{name}_group{g}")])
    offsets = [[], local[0][4]]
    for g in (1, 2):
        offsets.append(named(m, add_bits(offsets[-1], local[g][4]), f"{name}_offset{g + 1}"))
    total = Cat(*add_bits(offsets[3], local[3][4])[:5])
    ranks = []
    for e in range(16):
        g, k = divmod(e, _GROUP)
        ranks.append(Cat(*(add_bits(offsets[g], local[g][k]) + [Const(0, 1)] * 4)[:4]))
    return ranks, total


def count_onehot(m, bits, name):
    """``oh[v]`` = (popcount(``bits``) == ``v``) for ``v`` = 0 … ``len(bits)``.

    Up to 4 bits: one LUT per output. More: the counts of a 4-bit head and of the
    rest, combined as ``oh[v] = OR_a head[a] & rest[v - a]``; a combination of two
    counts of at most 4 (or 8 and 7) values is one or two LUT levels, so a count of
    up to 8 bits is 2 levels and of 15 bits 4 at most.
    """
    if len(bits) <= 4:
        # Each output as a sum of products of the bits (one LUT either way): as
        # ``popcount == v`` each would repeat the popcount, which Amaranth's simulator
        # evaluates at every use.
        oh = [Signal(name=f"{name}_is{v}") for v in range(len(bits) + 1)]
        for v, sig in enumerate(oh):
            products = []
            for pattern in range(1 << len(bits)):
                if pattern.bit_count() == v:
                    literals = [b if pattern >> k & 1 else ~b for k, b in enumerate(bits)]
                    products.append(Cat(*literals).all() if literals else Const(1, 1))
            m.d.comb += sig.eq(or_all(products))
        return oh
    split = 4 if len(bits) <= 8 else 8
    head = count_onehot(m, bits[:split], f"{name}_h")
    rest = count_onehot(m, bits[split:], f"{name}_r")
    return combine_onehot(m, head, rest, name)


def combine_onehot(m, a, b, name):
    """One-hot of the sum of two one-hot counts."""
    out = []
    for v in range(len(a) + len(b) - 1):
        sig = Signal(name=f"{name}_is{v}")
        m.d.comb += sig.eq(or_all([a[x] & b[v - x] for x in range(len(a))
                                   if 0 <= v - x < len(b)]))
        out.append(sig)
    return out


def shift_right_by4(value, amount, unit):
    """``value >> (amount · unit)``, as stages of 4:1 multiplexers (two bits of ``amount``
    each: one LUT6 per output bit and stage) rather than a chain of 2:1 stages.

    Bits shifted in from the top are zero.
    """
    width = len(value)
    stage = 0
    while stage < len(amount):
        bits = amount[stage:stage + 2]
        step = unit << stage
        # output bit k: value bit k + step · a for a = amount's 2 bits (or 1 at the end)
        options = [(value >> (step * a))[:width] if step * a < width else Const(0, width)
                   for a in range(1 << len(bits))]
        value = Array(options)[bits]
        stage += 2
    return value
