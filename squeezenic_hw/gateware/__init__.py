"""Amaranth gateware, a folder per layer (``docs/architecture.md``): ``common`` (layouts,
stream plumbing), ``codecs``, ``lane`` (stages both lanes use), ``tx``, ``rx``, ``sparse``,
``arrays``, ``axil``, ``opennic``."""
