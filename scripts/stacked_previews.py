"""The docs' preview sheets: one `augd preview` per pipeline, each sheet under the last, written as one image
(scripts/make_ops_preview.py, make_mixing_preview.py and make_autoaugment_preview.py call it)."""
from __future__ import annotations

import tempfile
from pathlib import Path


def stacked_previews(pipelines: dict[str, str], args: list[str], out: Path) -> int:
    """`augd preview PIPELINE *args` for each pipeline (name -> its YAML text), stacked top to bottom and written to
    `out` (.jpg at quality 85, else PNG). 0, or the first failing preview's exit code, or 1 if the write fails."""
    import cv2
    import numpy as np

    from augd.preview import main as preview
    sheets = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in pipelines.items():
            pipe, png = Path(tmp, f"{name}.yaml"), Path(tmp, f"{name}.png")
            pipe.write_text(text)
            rc = preview([str(pipe), *args, "-o", str(png)])
            if rc:
                return rc
            sheets.append(cv2.imread(str(png)))
    width = max(s.shape[1] for s in sheets)
    sheet = np.vstack([cv2.copyMakeBorder(s, 0, 0, 0, width - s.shape[1], cv2.BORDER_CONSTANT) for s in sheets])
    return 0 if cv2.imwrite(str(out), sheet, [cv2.IMWRITE_JPEG_QUALITY, 85] if out.suffix == ".jpg" else
                            [cv2.IMWRITE_PNG_COMPRESSION, 9]) else 1
