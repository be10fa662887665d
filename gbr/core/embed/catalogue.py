"""The models `gleambrctl models` knows, and where fetched ones live.

gbr ships one embedder and runs with no network; someone who has a network may want a
stronger or code-trained model. The catalogue (data/models.json) pins each known model to
a commit of its hub repository, so the same name always fetches the same bytes, and carries
its licence, shown before anything is downloaded. Fetched models are plain model folders
under `$GBR_HOME/models/NAME`, used by `--model-dir` or `--reranker` like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gbr.core.environ import MODELS_URL, gbr_home
from gbr.core.errors import ConfigError
from gbr.core.paths import DATA_DIR

CATALOGUE = DATA_DIR / "models.json"
HUB = MODELS_URL.default  # the Hugging Face hub, unless GBR_MODELS_URL names a mirror
# What each fetched folder holds besides its model: where it came from, and the digests.
RECEIPT = "gbr-model.json"
PURPOSES = ("embedder", "cross-encoder")


@dataclass(frozen=True, slots=True)
class RemoteFile:
    path: str  # inside the repository, at the pinned revision
    save_as: str  # its name in the fetched folder
    approx_bytes: int  # for the listing and the bar; the body limit is a margin above it
    sha256: str | None = None  # the hub's digest when published; else the commit pins it
    size: int | None = None  # the exact length, when known

    @property
    def limit(self) -> int:
        """The most bytes taken for this file: a server that sends more is refused."""
        return self.size if self.size is not None else self.approx_bytes * 5 // 4 + (1 << 20)


@dataclass(frozen=True, slots=True)
class KnownModel:
    name: str
    purpose: str  # embedder (--model-dir) or cross-encoder (ask --reranker)
    summary: str
    repo: str
    revision: str
    licence: str
    licence_url: str
    files: tuple[RemoteFile, ...]

    @property
    def source_url(self) -> str:
        return f"{HUB}/{self.repo}/tree/{self.revision}"

    @property
    def approx_bytes(self) -> int:
        return sum(f.approx_bytes for f in self.files)

    def url(self, base: str, file: RemoteFile) -> str:
        return f"{base.rstrip('/')}/{self.repo}/resolve/{self.revision}/{file.path}"


def load_catalogue(path: Path = CATALOGUE) -> dict[str, KnownModel]:
    """The known models by name; a catalogue that cannot be read is one ConfigError."""
    try:
        data = json.loads(path.read_text("utf-8"))
        models = [_model(entry) for entry in data["models"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the model catalogue {path}: {exc}") from exc
    return {m.name: m for m in models}


def _model(entry: Mapping[str, Any]) -> KnownModel:
    purpose = str(entry["purpose"])
    if purpose not in PURPOSES:
        raise ValueError(f"{entry['name']}: purpose {purpose!r} is not one of {PURPOSES}")
    files = tuple(
        RemoteFile(
            path=str(f["path"]),
            save_as=Path(str(f["save_as"])).name,  # never a path out of the folder
            approx_bytes=int(f["approx_bytes"]),
            sha256=f.get("sha256"),
            size=f.get("size"),
        )
        for f in entry["files"]
    )
    return KnownModel(
        name=str(entry["name"]),
        purpose=purpose,
        summary=str(entry["summary"]),
        repo=str(entry["repo"]),
        revision=str(entry["revision"]),
        licence=str(entry["licence"]),
        licence_url=str(entry["licence_url"]),
        files=files,
    )


def known_model(catalogue: Mapping[str, KnownModel], name: str) -> KnownModel:
    found = catalogue.get(name)
    if found is None:
        raise ConfigError(
            f"no known model {name!r}; `gleambrctl models list` names them: "
            + ", ".join(sorted(catalogue))
        )
    return found


def models_root(env: Mapping[str, str]) -> Path:
    """Where fetched models are kept: `$GBR_HOME/models` (gbr_home's cache folder)."""
    home = gbr_home(env, "cache")
    if home is None:
        raise ConfigError("no folder to keep models in; set GBR_HOME (or HOME)")
    return home / "models"


def base_url(env: Mapping[str, str]) -> str:
    """The hub, or the mirror GBR_MODELS_URL names."""
    return MODELS_URL.text(env) or HUB


def fetched_folder(root: Path, model: KnownModel) -> Path | None:
    """The model's folder when a fetch completed (its receipt is written last), else None."""
    folder = root / model.name
    if (folder / RECEIPT).is_file() and all((folder / f.save_as).is_file() for f in model.files):
        return folder
    return None
