"""Option values the commands share, as argparse ``type=`` callables: each turns the
option's text into its value or raises a :class:`~squeezenic_hw.cli.CliError` naming the
option (one line on stderr, exit status 2)."""

from squeezenic_hw.spec.codecs import ALL_CODECS, PRESETS, codec_info, resolve_codecs

from . import CliError

__all__ = ["OptionType", "integer", "codec_list", "codec_spec_list", "codec_or_preset",
           "option_message"]


def integer(text):
    """Decimal or ``0x…`` text as an int."""
    try:
        return int(text, 0)
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def codec_list(text):
    """Codec names or ids, comma-separated (each known), as a list of names and ids."""
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise ValueError("empty list")
    out = [int(s) if s.isdigit() else s for s in items]
    resolve_codecs(out)
    return out


def codec_or_preset(text):
    """A codec's name or id, or a preset's name, as given; any other lists both."""
    if text in PRESETS:
        return text
    try:
        codec_info(int(text) if text.isdigit() else text)
    except ValueError:
        raise ValueError(f"{text!r} is neither a codec nor a preset (codecs: "
                         f"{', '.join(ALL_CODECS)}; presets: {', '.join(PRESETS)})") from None
    return text


def codec_spec_list(text):
    """Codec specs (``sign``, ``5``, ``fixed:8``), comma-separated, as a list of strings;
    the build parameters check them."""
    return [s.strip() for s in text.split(",") if s.strip()]


def option_message(option, message):
    """``message`` of a ``ValueError`` about ``option`` (``"--host-bw"``), naming it: a
    message that starts with the parameter's name (``host_bw must be …``) has it replaced
    by the option, any other is prefixed with it."""
    param = option.lstrip("-").replace("-", "_")
    if message.startswith(param):
        return option + message[len(param):]
    return f"{option}: {message}"


class OptionType:
    """An argparse ``type=`` callable: ``convert(text)``, its ``ValueError`` raised as a
    :class:`~squeezenic_hw.cli.CliError` naming ``option`` (:func:`option_message`)."""

    def __init__(self, option, convert):
        self.option = option
        self.convert = convert
        self.__name__ = convert.__name__       # argparse's name for the value's type

    def __call__(self, text):
        try:
            return self.convert(text)
        except ValueError as exc:
            raise CliError(option_message(self.option, str(exc))) from None
