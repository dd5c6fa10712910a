"""The one definition of "shown literally": tracewh.core.textsafe and the table cells built on it."""

from __future__ import annotations

import unicodedata

import pytest

from tracewh.cli.display import cell_text
from tracewh.cli.output import escaped_frame, flat_frame, show
from tracewh.core.textsafe import escape_control, escape_lines, escape_nested, has_control


def test_every_control_character_is_made_visible() -> None:
    for code in [*range(0x20), *range(0x7F, 0xA0)]:
        out = escape_control(f"a{chr(code)}b")
        short = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(code, f"\\x{code:02x}")
        assert out == f"a{short}b"
        assert all(unicodedata.category(c) != "Cc" for c in out)


def test_bidi_separators_surrogates_and_noncharacters() -> None:
    for code in [0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0xD800, 0xDFFF,
                 0xFFFE, 0xFFFF]:
        assert escape_control(chr(code)) == f"\\u{code:04x}"


def test_ordinary_names_are_unchanged() -> None:
    for name in ("void at::native::vectorized_elementwise_kernel<4, float>", "µs", "日本語",
                 "[bold]x[/]", "C:\\path\\name", "emoji \U0001f600", "tab-free"):
        assert escape_control(name) == name and not has_control(name)


def test_nested_and_lines() -> None:
    assert escape_nested({"k\x1b": ["\x00", 1, None, ("\x07",)]}) == {"k\\x1b": ["\\x00", 1, None, ("\\x07",)]}
    assert escape_lines("a\x1b\nb\tc") == "a\\x1b\nb\\tc"


def test_tables_show_markup_and_escapes_literally(capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    df = pl.DataFrame({"[bold]h": ["[/bold] [link=http://x]y[/link] :smile:", "k\x1b]0;title\x07"]})
    show(df, "table", title="[red]t[/]")
    text = capsys.readouterr().out
    assert "[bold]h" in text and "[/bold] [link=http://x]y[/link] :smile:" in text
    assert "[red]t[/]" in text and "\x1b" not in text and "k\\x1b]0;title\\x07" in text
    assert cell_text("a\u202eb") == "a\\u202eb"


def test_frames_for_csv() -> None:
    import polars as pl

    df = pl.DataFrame({"l": [[1, 2], None], "s": ["a\x1b", None]})
    flat = flat_frame(df)
    assert flat["l"].to_list() == ["[1, 2]", None] and flat.schema["l"] == pl.String
    assert escaped_frame(flat)["s"].to_list() == ["a\\x1b", None]
