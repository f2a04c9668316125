"""forenset: datasets for explainable AI-generated image detection."""
__version__ = "0.1.0"
