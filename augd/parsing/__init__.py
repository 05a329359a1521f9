"""Bounded parsers for the files a user or a job supplies: YAML with line numbers (yamlsrc.py: pipelines,
configs, YOLO's data.yaml) and JSON and XML (jsonxml.py: COCO, VOC). Every size, depth and entity is limited;
errors name the file, what was refused and the limit. Below spec, io and annotations, which all use them;
imports nothing of augd above errors, files and defaults."""
