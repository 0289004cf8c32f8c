"""Sphinx configuration of tensorgym's docs: furo, MyST Markdown, autodoc + napoleon.

``make docs`` (sphinx-build -W -b html docs docs/_build/html) builds the site; the reference pages are generated
from the code at build time by the local extension ``docs/_ext/tensorgym_docs.py``.
"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "tensorgym"
author = "the tensorgym authors"
copyright = "the tensorgym authors, Apache-2.0"
try:
    from importlib.metadata import version as _version

    release = _version("tensorgym")
except Exception:  # noqa: BLE001 - a source tree that was never installed
    release = "0+unknown"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "tensorgym_docs",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "_scripts", "_ext", ".gitignore", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = "tensorgym"
html_static_path = ["_static"]
html_css_files = ["custom.css"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# The API pages document the public surface; docstrings elsewhere cross-reference modules and private helpers
# that have no page of their own, which is fine: an unresolved reference renders as plain code.
nitpicky = False
# Docstrings name modules relatively (":mod:`.export`"), which two packages have: the first one found is fine.
suppress_warnings = ["myst.header", "ref.python"]
