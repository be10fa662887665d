"""Download a known model into the cache, whole or not at all.

Every file goes into a hidden staging folder beside the cache's models; each is checked
(the length the server announced, the catalogue's sha256 where it has one, a cap on bytes)
and only when all are good does the folder get its receipt and its real name, in one
rename. A fetch that fails or is interrupted removes its staging folder, so `--model-dir`
never meets half a model; one killed outright leaves a hidden `.NAME.*.part` folder, which
the next fetch of that name sweeps away.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx

from gbr import __version__
from gbr.core.embed.catalogue import RECEIPT, KnownModel, RemoteFile, fetched_folder
from gbr.core.errors import ModelFetchError

# (file name, bytes received so far, bytes expected or None): for a progress bar.
Progress = Callable[[str, int, int | None], None]
CHUNK = 1 << 16
# Seconds to connect, and the longest silence while reading, before giving up.
CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 60.0


def fetch_model(
    model: KnownModel,
    base: str,
    root: Path,
    progress: Progress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Path:
    """The model's folder under `root`, downloaded from `base` unless already there."""
    done = fetched_folder(root, model)
    if done is not None:
        return done
    root.mkdir(parents=True, exist_ok=True)
    _sweep(root, model.name)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.name}.", suffix=".part", dir=root))
    try:
        timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        headers = {"user-agent": f"gbr/{__version__}"}
        # The hub answers a file with a redirect to its CDN, another host.
        with httpx.Client(
            timeout=timeout, follow_redirects=True, headers=headers, transport=transport
        ) as client:
            digests = {
                f.save_as: _download(client, model, model.url(base, f), f, staging, progress)
                for f in model.files
            }
        _write_receipt(staging, model, base, digests)
        target = root / model.name
        if target.exists():  # a partial folder someone made by hand: ours replaces it
            shutil.rmtree(target)
        os.rename(staging, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _download(
    client: httpx.Client,
    model: KnownModel,
    url: str,
    file: RemoteFile,
    folder: Path,
    progress: Progress | None,
) -> str:
    """Stream one file into `folder`, checked; its sha256, or ModelFetchError."""

    def failed(why: str) -> ModelFetchError:
        return ModelFetchError(
            f"could not fetch {model.name}: {url} {why}; check your network or "
            "GBR_MODELS_URL and run it again (nothing was kept)"
        )

    digest = hashlib.sha256()
    received = 0
    expected = file.size
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise failed(f"answered HTTP {response.status_code}")
            announced = _length(response)
            if announced is not None and announced > file.limit:
                raise failed(f"announces {announced} bytes, more than the {file.limit} expected")
            expected = expected or announced
            with (folder / file.save_as).open("wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    received += len(chunk)
                    if received > file.limit:
                        raise failed(f"sent more than the {file.limit} bytes expected")
                    digest.update(chunk)
                    out.write(chunk)
                    if progress is not None:
                        progress(file.save_as, received, expected)
    except httpx.HTTPError as exc:
        raise failed(f"failed after {received} bytes ({type(exc).__name__}: {exc})") from exc
    if expected is not None and received != expected:
        raise failed(f"sent {received} bytes of {expected}")
    found = digest.hexdigest()
    if file.sha256 is not None and found != file.sha256.lower():
        raise failed(f"has sha256 {found}, not the catalogue's {file.sha256}")
    return found


def _length(response: httpx.Response) -> int | None:
    """The body's length as announced, when the body is not compressed on the wire."""
    if response.headers.get("content-encoding", "identity") != "identity":
        return None
    text = response.headers.get("content-length", "")
    return int(text) if text.isdigit() else None


def _write_receipt(folder: Path, model: KnownModel, base: str, digests: dict[str, str]) -> None:
    """Where the files came from and what they hashed to; written last, it marks a
    folder as complete (catalogue.fetched_folder)."""
    receipt = {
        "name": model.name,
        "purpose": model.purpose,
        "repo": model.repo,
        "revision": model.revision,
        "licence": model.licence,
        "source": base,
        "sha256": digests,
    }
    (folder / RECEIPT).write_text(json.dumps(receipt, indent=2) + "\n", "utf-8")


def _sweep(root: Path, name: str) -> None:
    """Staging folders an earlier fetch of `name` left when it was killed outright."""
    for stale in root.glob(f".{name}.*.part"):
        shutil.rmtree(stale, ignore_errors=True)
