"""Runtime models: per-iteration time of PS and ring-all-reduce jobs, fitted online."""

from mlsched.perfmodel.base import Measurement, PerfFamily, RuntimeModel
from mlsched.perfmodel.estimator import FAMILIES, RuntimeEstimator, default_family
from mlsched.perfmodel.fit import FitResult, fit_linear
from mlsched.perfmodel.hetero import HeteroModel
from mlsched.perfmodel.ps_async import AsyncPSModel
from mlsched.perfmodel.ps_sync import SyncPSModel
from mlsched.perfmodel.ring import RingAllReduceModel

__all__ = [
    "FAMILIES",
    "AsyncPSModel",
    "FitResult",
    "HeteroModel",
    "Measurement",
    "PerfFamily",
    "RingAllReduceModel",
    "RuntimeEstimator",
    "RuntimeModel",
    "SyncPSModel",
    "default_family",
    "fit_linear",
]
