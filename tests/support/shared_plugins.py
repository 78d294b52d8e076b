"""Plugins that several test modules generate, through the session's ``generated_plugin``
fixture (tests/conftest.py): each is generated once for the whole run."""

#: A host lane of one codec, two generator lanes, their loopback RX lanes and checkers: the
#: co-simulation (tests/cosim) runs it and ``generate``'s tests (tests/flows) check it.
LOOPBACK_PLUGIN = dict(host_bw=200, codecs=["sign"], gen_codecs=["sign"], loopback=True)
