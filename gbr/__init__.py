"""gbr: local code search and question answering for Gleam packages."""

__version__ = "0.1.0"
