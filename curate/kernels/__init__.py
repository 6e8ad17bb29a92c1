"""Per-partition array kernels (numba): ``(offsets, bytes)`` string buffers in, arrays out.

Nothing here knows about Dask or DataFrames; nothing here imports the rest of curate.
"""

import os
import tempfile


def _writable(folder: str) -> bool:
    """Whether ``folder`` can be made and written to, tested as numba tests its cache folders."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def cache_fallback(here: str = os.path.dirname(__file__), environ=os.environ) -> str | None:
    """Where numba caches the compiled kernels when neither of its own places is writable.

    numba caches a ``cache=True`` function beside its module (``__pycache__``), else in the
    user's cache folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``), and with neither
    writable it raises ``RuntimeError: cannot cache function ...: no locator available`` as the
    module is imported: a read-only install run by a user without a home (a container's
    ``--user``, ``HOME=/``) failed so on every command. There ``NUMBA_CACHE_DIR`` is set (in
    ``environ``, which the workers a client starts inherit, and in ``numba.config``) to a folder
    of the temporary directory, one per user, and returned; else nothing changes and None is
    returned (also where ``NUMBA_CACHE_DIR`` is already set).
    """
    if environ.get("NUMBA_CACHE_DIR") or _writable(os.path.join(here, "__pycache__")):
        return None
    from numba.misc.appdirs import AppDirs  # the user cache folder as numba finds it

    if _writable(AppDirs(appname="numba", appauthor=False).user_cache_dir):
        return None
    folder = os.path.join(tempfile.gettempdir(), f"curate-numba-cache-{os.getuid()}")
    environ["NUMBA_CACHE_DIR"] = folder
    import numba

    numba.config.CACHE_DIR = folder  # read when numba was imported
    return folder


cache_fallback()
