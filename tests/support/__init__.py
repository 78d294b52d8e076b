"""Helpers the tests share: designs built once per worker, stream scenarios and checks,
parameter sweeps. Imported as ``support.<module>`` (``tests`` is on pytest's path)."""
