"""Rewrite the README's table of architectures from the registry (`llamay.arch.table.markdown()`).

python scripts/gen_readme_architectures.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llamay.arch.table import BEGIN, END, markdown  # noqa: E402

README = REPO / "README.md"


def main() -> int:
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    README.write_text(text[:start] + markdown() + text[end:], encoding="utf-8")
    print(f"{README.name}: table of architectures rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
