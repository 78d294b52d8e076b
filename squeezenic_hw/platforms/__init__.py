"""Board definitions (installed as ``squeezenic_hw.platforms``)."""
