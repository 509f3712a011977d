"""Watching the config files: a reload when one changes, appears or goes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from mcpx.config.finding import LoadedConfig, config_places, file_stamps, load_config
from mcpx.config.problems import ConfigError


def _watch_points(places: list[Path]) -> tuple[list[str], set[str]]:
    """The directories to watch (each place's nearest existing one, not recursively) and the paths in them that
    matter: the places themselves, and the missing directories on the way to them."""
    directories: set[str] = set()
    names = {str(p) for p in places}
    for place in places:
        directory = place.parent
        while not directory.is_dir() and directory != directory.parent:
            names.add(str(directory))
            directory = directory.parent
        directories.add(str(directory))
    return sorted(directories), names


async def watch_config(loaded: LoadedConfig, recheck: float = 2.0) -> AsyncIterator[LoadedConfig | ConfigError]:
    """Yield a freshly loaded config (or the error loading it) each time a source changes, or a config file
    appears where one may be (config_places): a daemon started on the embedded default takes up a
    ~/.config/mcpx/config.json written later, and goes back to the default when it goes.

    watchfiles wakes us at once; a stat check every `recheck` seconds backs it up, because inotify
    can miss a change made while the watch is being set up, or on filesystems that do not report
    (and a place whose directory does not exist yet is watched from the nearest one that does).
    """
    import asyncio

    import watchfiles

    places = config_places(loaded.cwd)
    # the sources as they were loaded; the other places as they are now (absent, or shadowed by a nearer file)
    at_load = dict(zip(map(str, loaded.sources), loaded.stamps, strict=False))
    stamps = [at_load.get(str(p), now) for p, now in zip(places, file_stamps(places), strict=True)]
    nudged: asyncio.Queue[None] = asyncio.Queue()

    async def notify(directories: list[str], names: set[str]) -> None:
        async for _changes in watchfiles.awatch(*directories, debounce=200, step=50, recursive=False,
                                                watch_filter=lambda _c, path: path in names):
            nudged.put_nowait(None)

    points = _watch_points(places)
    listener = asyncio.create_task(notify(*points))
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(nudged.get(), recheck)
            if (now_points := _watch_points(places)) != points:  # a directory on the way to a place appeared
                listener.cancel()
                points = now_points
                listener = asyncio.create_task(notify(*points))
            now = file_stamps(places)
            if now == stamps:
                continue
            stamps = now  # taken before the load: a change during it is seen at the next check
            try:
                yield load_config(loaded.cwd)
            except ConfigError as exc:
                yield exc
    finally:
        listener.cancel()
