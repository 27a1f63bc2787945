"""Real trainers: models, datasets and the processes that train them under the scheduler."""

__all__: list[str] = []
