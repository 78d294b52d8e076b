# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.tx.job_shaper.TxJobShaper`, the TX controller's
stage that turns the coalescer's job records into encoder jobs, on its own.

Random records of every kind the coalescer decides (dense beats that fit the open frame,
fill it or straddle its end; ``threshold`` beats whose first elements fit; closes with no
elements; each with and without the host frame's flush) go through the shaper under random
idle cycles and backpressure. A Python model written from the record's meaning says which
jobs leave: the open frame takes the elements that fit (all of a beat that fits; ``room``
of a dense beat that does not; the ``fit`` thermometer of a threshold beat), a beat that
does not fit closes the frame in its middle and opens the next with the rest, a flush
closes the frame at the beat's end, so a straddling beat with a flush is two jobs (the
second with no elements). Every job is compared bit for bit: elements, valid mask, offset,
parameters, codec and the packing side-band (count, split, close_mid, close_end, keep,
base, and the closing frame's layout: the index list when ``2k < ⌈n/8⌉``)."""

import random

import pytest

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.tx.coalescer import job_record_layout
from squeezenic_hw.gateware.tx.job_shaper import TxJobShaper
from squeezenic_hw.sim.streams import pack_payload, run_stream, unpack_fields
from squeezenic_hw.spec.threshold import INDEX_LIST

from support.shared_duts import shared
from support.tx_cut import below, cut_of
from support.unused import rejected

SETTINGS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]


def random_record(rng, kind):
    """A job record of ``kind`` ("close", "dense" or "sparse"), its other fields random."""
    n_before = rng.choice([0, 1, 15, 16, 17, rng.randrange(60000)])
    rec = {
        "close_only": 0, "v": 0, "room_big": rng.getrandbits(1),
        "room_low": rng.randrange(1, 17), "fit": rng.getrandbits(16),
        "keep": rng.getrandbits(16), "flush_end": rng.getrandbits(1), "sparse": 0,
        "n_before": n_before, "k_before": rng.randint(0, n_before),
        "offset": rng.getrandbits(32), "width": rng.randrange(1, 33),
        "elements": [rng.getrandbits(32) for _ in range(ELEMENTS_PER_BEAT)],
        "codec": rng.getrandbits(3),
        "params": {"param": rng.getrandbits(8), "stochastic": rng.getrandbits(1),
                   "scale": rng.getrandbits(32), "aux": rng.getrandbits(32),
                   "seed": rng.getrandbits(32)},
    }
    if kind == "close":
        rec.update(close_only=1, flush_end=0)
    elif kind == "dense":
        rec["v"] = rng.randrange(1, 17)
        if not rec["room_big"] and rng.random() < 0.4:
            rec["room_low"] = rec["v"] + rng.choice([-1, 0, 1]) if rec["v"] > 1 else 1
            rec["room_low"] = min(max(rec["room_low"], 1), 16)
    else:
        v = rng.randrange(1, 17)
        fits = rng.choice([v, v, rng.randint(0, v)])     # the first `fits` elements fit
        rec.update(sparse=1, v=v, fit=below(fits), keep=rng.getrandbits(v))
    return rec


def random_records(rng, count):
    return [random_record(rng, rng.choices(["close", "dense", "sparse"], [1, 3, 3])[0])
            for _ in range(count)]


def jobs_of(rec, width=None):
    """The model: the jobs one record becomes, as ``encoder_input_layout`` field dicts."""
    cut = cut_of(rec)

    def job(count, split, close_mid, close_end, keep, base, n_close, k_close):
        layout = INDEX_LIST if 16 * k_close < n_close else 0
        return {
            "elements": rec["elements"], "valid": below(count), "offset": rec["offset"],
            "params": rec["params"],
            "meta": {"codec": rec["codec"], "user": {
                "width": rec["width"] if width is None else width, "count": count,
                "split": split, "close_mid": close_mid, "close_end": close_end,
                "keep": keep, "base": base, "layout": layout}},
        }

    keep = 0 if rec["close_only"] else rec["keep"]
    n_close = (rec["n_before"] + cut.take) % 2**16
    jobs = [job(rec["v"], cut.take, int(cut.close1 and cut.rest_opens),
                int(cut.close1 and not cut.rest_opens), keep, rec["n_before"], n_close,
                rec["k_before"] + cut.prefix)]
    if cut.close2:
        # the rest of the beat opened the next frame; the flush closes it with no elements
        jobs.append(job(0, 0, 0, 1, 0, cut.rest, cut.rest, cut.suffix))
    return jobs


def check(records, *, width=None, idle=0.0, backpressure=0.0, seed=0):
    dut = shared(TxJobShaper, width=width)
    want = [job for rec in records for job in jobs_of(rec, width)]
    layout = dut.o.payload.shape()
    run = run_stream(dut, records, n_outputs=len(want), idle=idle,
                     backpressure=backpressure, seed=seed)
    assert len(run.outputs) == len(want)
    for j, (got, w) in enumerate(zip(run.outputs, want, strict=True)):
        if got != pack_payload(layout, w):
            user = unpack_fields(layout, got).meta.user
            got_user = {name: int(user[name]) for name in w["meta"]["user"]}
            raise AssertionError(f"job {j}: side-band {got_user}, want {w['meta']['user']} "
                                 "(or elements, mask, offset, parameters or codec differ)")
    return run


@pytest.mark.parametrize("idle, backpressure", SETTINGS)
@pytest.mark.parametrize("width", [None, 8])
def test_jobs_match_the_model(width, idle, backpressure):
    seed = (width or 0) * 10 + SETTINGS.index((idle, backpressure))
    records = random_records(random.Random(seed), 300)
    check(records, width=width, idle=idle, backpressure=backpressure, seed=seed)


def test_every_cut_of_a_dense_and_a_threshold_beat():
    """Each element count against each room (and each fit), with and without a flush."""
    rng = random.Random(3)
    records = []
    for v in range(1, 17):
        for room in range(1, 17):
            for flush in (0, 1):
                rec = random_record(rng, "dense")
                rec.update(v=v, room_big=0, room_low=room, flush_end=flush)
                records.append(rec)
        for fits in range(v + 1):
            for flush in (0, 1):
                rec = random_record(rng, "sparse")
                rec.update(v=v, fit=below(fits), keep=rng.getrandbits(v), flush_end=flush)
                records.append(rec)
    check(records, idle=0.2, backpressure=0.3, seed=3)


def test_full_rate_and_latency():
    """No idle, no backpressure: the first job ``LATENCY`` cycles after its record, then
    one job per cycle, the two jobs of a double close included."""
    records = random_records(random.Random(9), 200)
    run = check(records)
    assert run.latency == TxJobShaper.LATENCY
    assert run.max_ready_streak == len(run.outputs)


def test_input_is_the_coalescers_job_record():
    assert TxJobShaper().i.payload.shape() == job_record_layout()


@pytest.mark.parametrize("bad", [0, 33, True, 8.0, "8"])
def test_rejects_bad_width(bad):
    rejected(TxJobShaper, width=bad, match="width")
