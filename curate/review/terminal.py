"""A removed document beside its representative in the terminal (``curate inspect``), drawn with rich."""

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from curate.review.inspect import Pair, diff_blocks, trailing_space


def print_pair(console: Console, pair: Pair) -> None:
    """A removed document beside its representative: common text plain, differing words in colour
    (or, without colour, marked ``[-removed's-]`` and ``{+kept's+}`` as in ``git diff --word-diff``)."""
    title = f"[bold]{pair.kind}[/]: " + pair.headline(lambda doc: f"[bold]{escape(str(doc))}[/]")
    if pair.diff is None:
        console.print(title)
        console.print(f"  text unavailable: {escape(pair.unavailable)}")
        return
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column(f"removed: {escape(str(pair.removed))}", ratio=1, overflow="fold")
    table.add_column(f"kept: {escape(str(pair.representative))}", ratio=1, overflow="fold")
    width = max(8, (console.width - 7) // 2)  # of each column: the borders and padding take 7
    for block in diff_blocks(pair.diff):
        if isinstance(block, int):
            gap = Text(f"… {block:,} identical words …", style="dim italic")
            table.add_row(gap, gap)
            continue
        left, right = Text(), Text()
        for segment in block:
            if segment.kind == "same":
                if (left or right) and _drifted(console, left, right, segment.a, width):
                    table.add_row(left, right)  # a row is as tall as its taller side: they meet again below
                    left, right = Text(), Text()
                left.append(segment.a)
                right.append(segment.b)
            else:  # the whitespace after the words is not part of the change
                (a, a_space), (b, b_space) = trailing_space(segment.a), trailing_space(segment.b)
                if console.color_system is None:  # piped or redirected: mark the words themselves
                    left.append(f"[-{a}-]{a_space}" if a else a_space)
                    right.append(f"{{+{b}+}}{b_space}" if b else b_space)
                else:
                    left.append(a, style="bold red strike").append(a_space)
                    right.append(b, style="bold green").append(b_space)
        table.add_row(left, right)
    console.print(table)


def _drifted(console: Console, left: Text, right: Text, common: str, width: int) -> bool:
    """Whether common text that follows ``left`` / ``right`` would start on different lines of
    the two columns, or wrap differently from different columns: then it starts a new row."""
    a, b = left.wrap(console, width), right.wrap(console, width)
    if len(a) != len(b):
        return True
    ends = a[-1].cell_len, b[-1].cell_len
    return ends[0] != ends[1] and max(ends) + len(common.rstrip()) > width
