"""Register scripts as text, for runs of the plugin's core (``sim/core_model.py``).

One step per line; ``#`` starts a comment; words are separated by blanks::

    write REGISTER VALUE        # REGISTER: a name of the build's map, or an address
    read REGISTER
    wait CYCLES
    poll REGISTER VALUE [EVERY] # read every EVERY cycles (default 50) until it is VALUE
    inputs-done                 # wait until every input stream has sent its last beat
    frames STREAM COUNT         # wait until output STREAM (c2h0, tx1, ...) has COUNT frames

Numbers are decimal or ``0x`` hexadecimal. Register names are those of
:func:`~squeezenic_hw.regmap.plugin.plugin_register_map` (``squeezenic-hw generate
--registers`` lists them).
"""

from squeezenic_hw.regmap.plugin import plugin_register_map

from . import core_model as cm

__all__ = ["parse_register_script", "register_name"]

#: word -> (step maker, the kinds of its arguments, how many may be left out)
_STEPS = {
    "write": (cm.write, ("register", "value"), 0),
    "read": (cm.read, ("register",), 0),
    "wait": (cm.wait, ("count",), 0),
    "poll": (cm.poll, ("register", "value", "count"), 1),
    "inputs-done": (cm.inputs_done, (), 0),
    "frames": (cm.output_frames, ("stream", "count"), 0),
}


def _number(word):
    try:
        value = int(word, 0)
    except ValueError:
        raise ValueError(f"{word!r} is not a number") from None
    if value < 0:
        raise ValueError(f"{word!r} is negative")
    return value


def parse_register_script(text, params, *, looped=False):
    """The :class:`~.core_model.RegisterStep`\\ s of ``text`` for a run of the core built
    with ``params`` (``looped`` as in :func:`~.core_model.core_streams`). Raises
    ``ValueError`` starting ``line N:`` at the first line it cannot read."""
    regmap = plugin_register_map(params)
    outputs = cm.core_streams(params, looped=looped)[1]
    steps = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        try:
            steps.append(_step(words, regmap, outputs))
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return steps


def _step(words, regmap, outputs):
    kind = words[0].lower()
    if kind not in _STEPS:
        raise ValueError(f"unknown step {words[0]!r} (one of {', '.join(_STEPS)})")
    make, kinds, optional = _STEPS[kind]
    given = words[1:]
    if not len(kinds) - optional <= len(given) <= len(kinds):
        usage = " ".join([kind, *(k.upper() for k in kinds)])
        raise ValueError(f"{kind} takes {len(kinds)} argument(s): {usage}")
    args = []
    for what, word in zip(kinds, given, strict=False):
        if what == "register":
            args.append(_register(word, regmap))
        elif what == "stream":
            if word not in outputs:
                raise ValueError(f"no output stream {word!r} (this run has "
                                 f"{', '.join(outputs)})")
            args.append(outputs.index(word))
        else:
            args.append(_number(word))
    return make(*args)


def _register(word, regmap):
    if word[:1].isdigit():
        address = _number(word)
        if address % 4 or address >= 2**32:
            raise ValueError(f"address {word} is not a 32-bit word address")
        return address
    if word not in regmap:
        raise ValueError(f"no register {word!r} in this build "
                         "(squeezenic-hw generate --registers lists them)")
    return regmap[word].offset


def register_name(regmap, address):
    """The name of the register at ``address`` in ``regmap``, or its address in hex."""
    register = regmap.at(address)
    return register.name if register is not None else f"{address:#06x}"
