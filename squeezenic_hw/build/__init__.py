"""The build parameters of the plugin: :class:`~.params.PluginParams`, every option of
``squeezenic-hw generate`` checked and resolved once into the forms the flows and the
gateware tops take, and the codec choice that gives its defaults
(:mod:`~.codec_choice`: the generator lanes' codec per host bandwidth, the loopback RX
lanes a wire needs). Imports :mod:`squeezenic_hw.spec` only."""
