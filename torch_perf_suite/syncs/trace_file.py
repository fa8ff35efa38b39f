"""A torch.profiler Chrome trace read from its file, gzipped or not; what cannot be read is a TraceError naming the file
and what to do."""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from pathlib import Path


class TraceError(ValueError):
    """A trace that cannot be analysed: the message names the file and what is missing."""


def load_trace(path: str | os.PathLike) -> dict:
    """Read a Chrome trace written by `prof.export_chrome_trace`, gzipped or not (told by its first bytes, not its name)."""
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            text = gzip.open(raw, "rt", encoding="utf-8") if gzipped else io.TextIOWrapper(raw, encoding="utf-8")
            trace = json.load(text)
    except FileNotFoundError as e:
        raise TraceError(f"{path}: no such file") from e
    except IsADirectoryError as e:
        raise TraceError(f"{path}: is a directory, not a trace file") from e
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 JSON ({e}); is this a Chrome trace? record it again") from e
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as e:  # ValueError: bad JSON
        raise TraceError(f"{path}: not a readable Chrome trace ({e}); record it again") from e
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{path}: no 'traceEvents' list; is this a torch.profiler Chrome trace?")
    return trace
