"""A removed document beside its representative in the terminal (``curate inspect``), drawn with rich."""

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from curate.review.inspect import Pair, diff_blocks, trailing_space, visible


def _id(doc) -> str:
    """An id as rich markup on one line: a newline or tab in it is shown too (``\\x0a``), or
    it broke the headline and the table's header in two."""
    return escape(visible(str(doc)).replace("\n", "\\x0a").replace("\t", "\\x09"))


def print_pair(console: Console, pair: Pair) -> None:
    """A removed document beside its representative: common text plain, differing words in colour
    (or, without colour, marked ``[-removed's-]`` and ``{+kept's+}`` as in ``git diff --word-diff``)."""
    title = _packed(f"[bold]{pair.kind}[/]: " + pair.headline(lambda doc: f"[bold]{_id(doc)}[/]"), console.width)
    if pair.diff is None:
        console.print(title)
        console.print(f"  text unavailable: {escape(visible(pair.unavailable))}")
        return
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column(f"removed: {_id(pair.removed)}", ratio=1, overflow="fold")
    table.add_column(f"{pair.kept_label}: {_id(pair.representative)}", ratio=1, overflow="fold")
    width = max(8, (console.width - 7) // 2)  # of each column: the borders and padding take 7
    for block in diff_blocks(pair.diff):
        if isinstance(block, str):
            gap = Text(f"… {block} …", style="dim italic")
            table.add_row(gap, gap)
            continue
        left, right = Text(), Text()
        for segment in block:
            if segment.kind == "same":
                if (left or right) and _drifted(console, left, right, visible(segment.a), width):
                    table.add_row(left, right)  # a row is as tall as its taller side: they meet again below
                    left, right = Text(), Text()
                left.append(visible(segment.a))
                right.append(visible(segment.b))
            else:  # the whitespace after the words is not part of the change
                (a, a_space), (b, b_space) = trailing_space(visible(segment.a)), trailing_space(visible(segment.b))
                if console.color_system is None:  # piped or redirected: mark the words themselves
                    left.append(f"[-{a}-]{a_space}" if a else a_space)
                    right.append(f"{{+{b}+}}{b_space}" if b else b_space)
                else:
                    left.append(a, style="bold red strike").append(a_space)
                    right.append(b, style="bold green").append(b_space)
        table.add_row(left, right)
    console.print(table)


def _packed(markup: str, width: int) -> str:
    """``markup``'s `` · ``-separated phrases on lines of at most ``width`` cells where each fits:
    a line breaks between phrases, not inside one ("fuzzy group of" / "2")."""
    lines: list[str] = []
    for phrase in markup.split(" · "):
        joined = f"{lines[-1]} · {phrase}" if lines else phrase
        if lines and Text.from_markup(joined).cell_len > width:
            lines.append(phrase)
        else:
            lines[-1:] = [joined]
    return "\n".join(lines)


def _drifted(console: Console, left: Text, right: Text, common: str, width: int) -> bool:
    """Whether common text that follows ``left`` / ``right`` would start on different lines of
    the two columns, or wrap differently from different columns: then it starts a new row."""
    a, b = left.wrap(console, width), right.wrap(console, width)
    if len(a) != len(b):
        return True
    ends = a[-1].cell_len, b[-1].cell_len
    return ends[0] != ends[1] and max(ends) + len(common.rstrip()) > width
