"""The reduce lane of the ring all-reduce (``docs/wire-format.md`` section 8) and its
stages: the checks on received reduce frames."""
