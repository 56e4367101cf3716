"""tapegpu's version (also pyproject.toml's), in a module of its own so that any part of the
package can read it without importing the package's top level."""
__version__ = "0.1.0"
