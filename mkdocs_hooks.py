"""The docs site's build hook (mkdocs.yml, ``hooks:``): every generated table in a page is made
afresh from its source (dyn4_gym/doc_tables.py) before the page is rendered, so the site never
shows a hand-kept copy; and the home page is the README itself (``<!-- include: README.md -->``),
its links into ``docs/`` made the site's."""

import re
from pathlib import Path

from dyn4_gym.doc_tables import fill

ROOT = Path(__file__).resolve().parent
INCLUDE = re.compile(r"<!-- include: ([\w.-]+) -->")


def _include(m) -> str:
    return (ROOT / m.group(1)).read_text().replace("](docs/", "](")


def on_page_markdown(markdown, page, config, files):
    return fill(INCLUDE.sub(_include, markdown))
