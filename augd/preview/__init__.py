"""`augd preview`: a contact sheet of what a pipeline does to a few images, before the job.

One row per input image: the input as the engine decodes it (upright, RGB), then N of its augmented variants,
each with what the plan drew for it written underneath (`rot +7.3°`, `flip LR`, `hue +0.080`, `one_of →
random_flip_up_down`, ops whose p coin said no as `skipped`), each op in its own words (Op.describe). Every
variant tile is THE record `augd run` writes for that (image, relative path, variant); the sheet only
letterboxes the tiles to one size.

  sheet.py    what a sheet holds: tiles from the job's compiled graph, the plan's decisions as text
  render.py   drawing: letterbox, text, the sheet as one RGB image
  cli.py      the `augd preview` verb (also `python -m augd.preview`)
  records.py  the daemon's hook: a sheet of the last job's first images, from the records it wrote

The package imports neither TensorFlow nor OpenCV until a sheet is made (the CLI builds its parser cheaply).
"""
from augd.preview.cli import add_preview_arguments, cmd_preview, main
from augd.preview.records import JobSheet, row_from_outcome, sheet_png
from augd.preview.render import contact_sheet, letterbox, render_sheet
from augd.preview.sheet import MAX_DEFAULT_VARIANTS, PreviewRow, Tile, describe_variant, format_decisions, preview_rows

__all__ = ["JobSheet", "MAX_DEFAULT_VARIANTS", "PreviewRow", "Tile", "add_preview_arguments", "cmd_preview", "contact_sheet",
           "describe_variant", "format_decisions", "letterbox", "main", "preview_rows", "render_sheet",
           "row_from_outcome", "sheet_png"]
