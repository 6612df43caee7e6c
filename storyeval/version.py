"""The package version, in a module of its own so that setup.py and the settings string read it without importing torch."""

__version__ = "0.1.0.dev0"
