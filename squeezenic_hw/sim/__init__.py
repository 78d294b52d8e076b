"""Testbench harness: stream drivers, scoreboards, benches (installed as ``squeezenic_hw.sim``)."""
