"""The Wireshark and tshark dissector of SqueezeNIC frames: a Lua script whose wire-format
facts are made from :mod:`squeezenic_hw.spec` (:mod:`.lua_script`), written out by
``squeezenic-hw dissector`` (``docs/wireshark.md``). Imports the spec only."""
