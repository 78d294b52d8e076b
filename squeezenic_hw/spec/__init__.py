"""The facts the reference, the gateware and the tools share: the frame format, the codec
registry, counter names, sizing rules and constants (``docs/wire-format.md``). Imports
nothing else of the package."""
