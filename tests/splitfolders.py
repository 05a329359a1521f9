"""A tree-layout job (`images/<split>/` + `<labels>/<split>/`, as tests/annotated.py and tests/exports.py write it)
moved into the split folders DOTA and Roboflow ship: `<split>/images/` + `<split>/<labels>/`. TensorFlow-free."""
from __future__ import annotations

import os
import shutil

__all__ = ["as_split_folders"]


def as_split_folders(root: str, labels: str, names: dict[str, str] | None = None, unlabelled=()) -> dict[str, str]:
    """Move `images/<split>/` to `<name>/images/` and `<labels>/<split>/` to `<name>/<labels>/` (`names`: split
    folder -> the folder it becomes, Roboflow's {"val": "valid"}; default the same name); the splits in `unlabelled`
    lose their labels folder (DOTA's test/). Every image must be in a split folder. {old image path: new}."""
    names = names or {}
    moved = {}
    for split in sorted(os.listdir(os.path.join(root, "images"))):
        assert os.path.isdir(os.path.join(root, "images", split)), f"images/{split}: in no split folder"
        new = names.get(split, split)
        os.makedirs(os.path.join(root, new))
        os.rename(os.path.join(root, "images", split), os.path.join(root, new, "images"))
        for dirpath, _, files in os.walk(os.path.join(root, new, "images")):
            for f in files:
                rel = os.path.relpath(os.path.join(dirpath, f), os.path.join(root, new, "images")).replace(os.sep, "/")
                moved[f"images/{split}/{rel}"] = f"{new}/images/{rel}"
        if split in unlabelled:
            shutil.rmtree(os.path.join(root, labels, split))
        else:
            os.rename(os.path.join(root, labels, split), os.path.join(root, new, labels))
    for folder in ("images", labels):
        os.rmdir(os.path.join(root, folder))
    return moved

