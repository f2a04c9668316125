"""FakeBench (Li et al.): the official release format lives in ``official``."""
