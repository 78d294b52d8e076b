"""The OpenNIC ``box_250mhz`` user plugin, its core, and the 322 MHz pass-through."""
