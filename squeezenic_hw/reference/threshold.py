"""The numpy reference of codec 7, ``threshold`` (wire format section 4).

Sparsification: a wire frame keeps the elements with ``abs(x) > scale`` (NaN
never) as exact fp32 values and says which ones they are with a bitmap or an
index list, whichever is shorter (a tie picks the bitmap). Decoding gives the
kept values back and +0.0 everywhere else.

Decisions where the spec is silent (also in ``docs/threshold.md``):

* **Host frames** of codec 7 carry parameter 0; the parameter is the wire
  layout (0 bitmap, 1 index list) and only wire frames set it.
* **Sizing.** ``B = mtu − 64``. The TX lane admits the next element into the
  open wire frame while ``min(⌈n/8⌉, 2k) + 4k ≤ B`` and ``n ≤ 65535`` still
  hold with it (:func:`~.spec.threshold.fits`); a frame closes ``full`` when the next element
  of its stream does not fit.
* **Length check on RX.** Bitmap: ``len − 64 − ⌈n/8⌉`` must be a non-negative
  multiple of 4 (``k`` is the quotient); index list: ``len − 64`` must be a
  multiple of 6. The payload is not otherwise judged before decoding.
* **Inconsistent payloads** (never written by a SqueezeNIC TX) are decoded by
  one rule and counted, never dropped. Bitmap: the element with the r-th set
  bit (bits ≥ n ignored) takes value r if r < k, else +0.0; values past the
  set bits are ignored. Index list: entry j is *used* when ``idx_j < n`` and
  it is greater than every earlier used entry; the used entries form a bitmap
  that is decoded as above. Counters: ``sparse_count_errors`` (set bits ≠ k)
  and ``sparse_layout_errors`` (bitmap padding bits set, or an index entry
  not used).
"""

from dataclasses import dataclass

import numpy as np

from squeezenic_hw.spec.threshold import BITMAP, MAX_N, choose_layout, layout_bytes, values_count

__all__ = ["keep_mask", "encode_payload", "DecodedPayload", "decode_payload"]

def keep_mask(values_f32, scale):
    """Which elements are kept: ``abs(x) > scale`` in float32 (NaN never; ``-0 > -0`` is false).

    Parameters
    ----------
    values_f32 : array_like of float32
    scale : float or np.float32
        The header's ``scale`` (any fp32, NaN keeps nothing, a negative scale
        keeps every non-NaN element except when both are zeros).

    Returns
    -------
    numpy.ndarray of bool
    """
    x = np.asarray(values_f32, dtype=np.float32).reshape(-1)
    with np.errstate(invalid="ignore"):
        return np.abs(x) > np.float32(scale)


def encode_payload(values_f32, keep):
    """The wire payload of one wire frame: ``(layout, payload bytes)``.

    Parameters
    ----------
    values_f32 : array_like of float32
        The frame's ``n`` elements (bit patterns kept).
    keep : array_like of bool
        :func:`keep_mask` of them.
    """
    v = np.ascontiguousarray(np.asarray(values_f32, dtype=np.float32)).reshape(-1)
    keep = np.asarray(keep, dtype=bool).reshape(-1)
    if keep.size != v.size or v.size == 0 or v.size > MAX_N:
        raise ValueError(f"need 1…{MAX_N} values with one keep flag each, "
                         f"got {v.size} values and {keep.size} flags")
    k = int(keep.sum())
    layout = choose_layout(v.size, k)
    if layout == BITMAP:
        head = np.packbits(keep, bitorder="little").tobytes()
    else:
        head = np.flatnonzero(keep).astype("<u2").tobytes()
    return layout, head + v.view(np.uint32)[keep].astype("<u4").tobytes()


@dataclass(frozen=True)
class DecodedPayload:
    """What :func:`decode_payload` found."""
    values: np.ndarray        # n float32 elements
    count_error: bool         # set bits (used entries) ≠ k
    layout_error: bool        # bitmap padding bits set, or an index entry not used


def decode_payload(payload, n, layout):
    """Decode a threshold wire payload (the rule of the module docstring).

    Parameters
    ----------
    payload : bytes
        The wire frame's payload (length already checked with :func:`values_count`).
    n : int
        Elements of the frame.
    layout : int
        :data:`BITMAP` or :data:`~squeezenic_hw.spec.threshold.INDEX_LIST`.

    Returns
    -------
    DecodedPayload
    """
    payload = bytes(payload)
    k = values_count(n, layout, len(payload))
    if k is None:
        raise ValueError(f"payload of {len(payload)} bytes does not fit layout {layout} "
                         f"with n = {n}")
    head = layout_bytes(n, k, layout)
    raw = np.frombuffer(payload, dtype=np.uint8, count=head)
    if layout == BITMAP:
        bits = np.unpackbits(raw, bitorder="little").astype(bool)
        layout_error = bool(bits[n:].any())
        keep = bits[:n]
    else:
        idx = raw.view("<u2").astype(np.int64)
        # used: below n and above every earlier used entry (= the running max of those < n)
        below = np.where(idx < n, idx, -1)
        prior = np.concatenate([[-1], np.maximum.accumulate(below)[:-1]]) if idx.size else idx
        used = (idx < n) & (idx > prior)
        layout_error = not bool(used.all())
        keep = np.zeros(n, dtype=bool)
        keep[idx[used]] = True
    vals = np.frombuffer(payload, dtype="<u4", count=k, offset=head)
    out = np.zeros(n, dtype=np.uint32)
    where = np.flatnonzero(keep)
    take = min(where.size, k)
    out[where[:take]] = vals[:take]
    return DecodedPayload(values=out.view(np.float32), count_error=where.size != k,
                          layout_error=layout_error)
