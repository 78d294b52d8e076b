"""Hypothesis strategies that draw recipes, and :func:`draw_example`, which draws
one the same way for the same seed."""

from dataclasses import replace

import hypothesis
from hypothesis import strategies as st
from hypothesis.internal.conjecture.providers import AVAILABLE_PROVIDERS, HypothesisProvider

from squeezenic_hw.spec.codecs import codec_info, resolve_codecs

from .recipes import (
    IDENTITY_FIELDS,
    LENGTH_KINDS,
    MALFORMED_KINDS,
    NARROW_SCALE_KINDS,
    OFFSET_KINDS,
    SCALE_KINDS,
    U32,
    VALUE_KINDS,
    MalformedRecipe,
    StreamRecipe,
    TrafficRecipe,
)

__all__ = [
    "MAX_STREAM_FRAMES", "IDLE_TIMEOUTS", "stream_recipes", "malformed_recipes",
    "traffic_recipes", "draw_example", "SEEDED_BACKEND",
]


_SEEDS = st.integers(0, U32 - 1)
#: Most host frames of one stream.
MAX_STREAM_FRAMES = 64
# Shrinks towards long streams: a batch of few streams is the simpler one.
_FRAMES_PER_STREAM = st.integers(0, MAX_STREAM_FRAMES - 1).map(
    lambda k: MAX_STREAM_FRAMES - k)


def codec_ids(codecs):
    return sorted(resolve_codecs(codecs))


@st.composite
def stream_recipes(draw, codecs=None, code_bits=None, narrow=False):
    """Recipes of one tensor stream of a codec of ``codecs`` (default 0–6) with 1…
    :data:`MAX_STREAM_FRAMES` host frames (:func:`~.streams.stream_frames` makes them). With
    ``code_bits``, the codecs whose parameter is their code width (``fixed``, ``qsgd``)
    take that one (a lane built with ``code_bits`` takes no other). With ``narrow``, the
    streams a narrow lane takes (``NarrowTxLane``): ``fixed`` rounds to nearest
    (``stochastic`` clear) at scales of :data:`~.recipes.NARROW_SCALE_KINDS`."""
    codec = draw(st.sampled_from(codec_ids(codecs)))
    info = codec_info(codec)
    param = draw(st.integers(*info.param_range)) if (info.param_range
                                                    and not info.variable) else 0
    if code_bits is not None and info.param_range and not info.variable:
        param = code_bits
    stochastic = draw(st.booleans())
    held = narrow and info.name == "fixed"
    return StreamRecipe(
        codec=codec, param=param, stochastic=stochastic and not held, seed=draw(_SEEDS),
        scale_kind=draw(st.sampled_from(NARROW_SCALE_KINDS if held else SCALE_KINDS)),
        values=draw(st.sampled_from(VALUE_KINDS)),
        edge_share=draw(st.sampled_from((0.0, 0.02, 0.2, 1.0))),
        lengths=draw(st.sampled_from(LENGTH_KINDS)),
        frames=draw(_FRAMES_PER_STREAM),
        flush_rate=draw(st.sampled_from((0.0, 0.05, 0.5, 1.0))),
        gap_rate=draw(st.sampled_from((0.0, 0.05, 0.5))),
        offsets=draw(st.sampled_from(OFFSET_KINDS)),
        identity=draw(st.sampled_from(IDENTITY_FIELDS)),
        header_noise=draw(st.booleans()),
        data_seed=draw(_SEEDS))


def check_lane(lane):
    if lane not in MALFORMED_KINDS:
        raise ValueError(f"lane must be 'tx' or 'rx', got {lane!r}")


def malformed_recipes(lane, codecs=None):
    """Recipes of frames ``lane`` (``"tx"`` or ``"rx"``) must pass unchanged, every kind of
    :data:`~.recipes.MALFORMED_KINDS` made from a frame of a codec of ``codecs``."""
    check_lane(lane)
    return st.builds(MalformedRecipe, kind=st.sampled_from(MALFORMED_KINDS[lane]),
                     codec=st.sampled_from(codec_ids(codecs)), data_seed=_SEEDS)


#: Idle timeouts of the timed batches.
IDLE_TIMEOUTS = (1, 2, 5, 16, 50, 200)


@st.composite
def traffic_recipes(draw, codecs=None, *, frames=100, timed=False, trusted=False,
                    code_bits=None, narrow=False):
    """Recipes of a batch of exactly ``frames`` host frames (:class:`~.recipes.TrafficRecipe`).

    With ``timed``, one batch in four is timed: an idle timeout from
    :data:`IDLE_TIMEOUTS`, and no host frame with a wrong ``tuser_size`` (its beats on the
    bus would not be the ones the reference's clock counts). Without, nothing about
    timing is drawn: the batches are those of earlier versions.

    With ``trusted``, the host frames are those a trusted TX lane takes (``TxLane(...,
    trusted=True, code_bits=code_bits)``): only tensor streams, no malformed frame and no
    wrong ``tuser_size``; with ``code_bits``, ``fixed`` and ``qsgd`` frames carry it. The
    wire side keeps its malformed frames (the RX lane is host-facing). ``narrow`` (which
    implies ``trusted``) draws the streams a narrow lane takes (:func:`stream_recipes`)."""
    if frames < 1:
        raise ValueError(f"frames must be at least 1, got {frames}")
    share = draw(st.sampled_from((0.0, 0.02, 0.1, 0.3)))
    wire_bad = min(frames - 1, round(frames * share))
    trusted = trusted or narrow
    bad = 0 if trusted else wire_bad
    good = frames - bad
    streams, one_stream = [], stream_recipes(codecs, code_bits, narrow)
    while good > 0:
        stream = draw(one_stream)
        if stream.frames > good:
            stream = replace(stream, frames=good)
        streams.append(stream)
        good -= stream.frames
    recipe = TrafficRecipe(
        streams=tuple(streams),
        malformed=tuple(draw(st.lists(malformed_recipes("tx", codecs),
                                      min_size=bad, max_size=bad))),
        size_errors=0 if trusted else draw(st.integers(0, min(frames - bad,
                                                               1 + frames // 50))),
        run_length=draw(st.sampled_from((1, 2, 4, 16))),
        wire_malformed=tuple(draw(st.lists(malformed_recipes("rx", codecs),
                                           min_size=wire_bad, max_size=wire_bad))),
        wire_size_errors=draw(st.integers(0, 1 + frames // 50)),
        seed=draw(_SEEDS))
    if timed and draw(st.sampled_from((False, False, False, True))):
        recipe = replace(recipe, size_errors=0,
                         idle_timeout=draw(st.sampled_from(IDLE_TIMEOUTS)))
    return recipe


class _SeededProvider(HypothesisProvider):
    """Hypothesis's own choices, less the constants it lifts from the source of whatever
    modules are loaded and not installed in site-packages (5 % of its draws): those make
    a seed's example depend on what the process has imported, on whether this package is
    installed editable, and on every literal in it. (``backend`` and the provider class
    are Hypothesis's documented hooks for other backends; the method overridden is not,
    and ``tests/sim/test_traffic.py`` fails if it stops taking effect.)"""

    def _maybe_draw_constant(self, choice_type, constraints, *, p=0.05):
        return None


#: The Hypothesis backend of :func:`draw_example` (``settings(backend=...)``).
SEEDED_BACKEND = "squeezenic-seeded"


def draw_example(strategy, seed):
    """One example of ``strategy`` drawn at random, the same one for the same ``seed`` (and
    the same hypothesis), whatever else the process has imported and however this package
    is installed.

    Hypothesis's generation phase runs outside a test, with no example database, no
    shrinking and no health checks, for two examples: the first is the strategy's
    simplest, the second a random draw, which is returned. (A longer run would mutate
    earlier examples into near copies, which a test wants and a campaign of independent
    batches does not.) The draw runs on :data:`SEEDED_BACKEND`: Hypothesis's choices
    without the constants it takes from the loaded modules' source. On it the second
    example is a plain random draw; Hypothesis's own backend makes it differ from the
    first in its first choices, so that a strategy's simplest first choice never came up.
    """
    AVAILABLE_PROVIDERS.setdefault(SEEDED_BACKEND, f"{__name__}._SeededProvider")
    examples = []

    @hypothesis.settings(max_examples=2, database=None, deadline=None,
                         phases=[hypothesis.Phase.generate], backend=SEEDED_BACKEND,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.seed(seed)
    @hypothesis.given(strategy)
    def collect(example):
        examples.append(example)

    collect()
    return examples[-1]
