"""Constants of the counter-based random draws (SqzRng v1, ``docs/rng.md``) that the
reference and the gateware both use."""

__all__ = ["GOLDEN"]

#: XOR-ed into the seed before it is hashed into the frame key.
GOLDEN = 0x9E3779B9
