"""Measurement datasets (seed 004): which layers to measure, how to explore them, export to pandas, stats."""

from .build import TaskOutcome, build_dataset, plan_tasks
from .export import dataset_frame, dataset_rows, export_dataset
from .priors import ShapePrior, ShapeRow
from .stats import DatasetStats, LayerStats, dataset_stats

__all__ = ["DatasetStats", "LayerStats", "ShapePrior", "ShapeRow", "TaskOutcome", "build_dataset", "dataset_frame",
           "dataset_rows", "dataset_stats", "export_dataset", "plan_tasks"]
