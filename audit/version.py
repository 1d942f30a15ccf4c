"""The package version, in the lowest layer so that every layer can record it."""

__version__ = "0.1.0"
