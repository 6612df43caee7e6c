"""Model classes. Importing this package registers them with the transformers Auto classes."""
from storyeval.models.union import UnionConfig, UnionModel, UnionOutput

__all__ = ["UnionConfig", "UnionModel", "UnionOutput"]
