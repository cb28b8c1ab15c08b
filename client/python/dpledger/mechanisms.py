"""Mechanisms as dataclasses (proto/dpledger.proto ``Mechanism``), and a ``Step``
(a mechanism applied ``count`` times). Unset sensitivity is 1, as on the server.

Anywhere a mechanism is taken, a SPEC string of ``dpledger account --step`` works too,
e.g. ``"subsampled_gaussian:sigma=1,q=0.001"``.
"""
from dataclasses import dataclass
from typing import Union

from ._generated import dpledger_pb2 as pb


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise with standard deviation ``sigma * sensitivity``."""
    sigma: float
    sensitivity: float = 1.0

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_GAUSSIAN, sigma=self.sigma,
                            sensitivity=self.sensitivity)


@dataclass(frozen=True)
class Laplace:
    """Laplace noise of scale ``scale`` for a query of L1 sensitivity ``sensitivity``."""
    scale: float
    sensitivity: float = 1.0

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_LAPLACE, scale=self.scale,
                            sensitivity=self.sensitivity)


@dataclass(frozen=True)
class SubsampledGaussian:
    """Poisson-subsampled Gaussian (DP-SGD): noise multiplier ``sigma``, sampling rate ``q``."""
    sigma: float
    q: float
    sensitivity: float = 1.0

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_SUBSAMPLED_GAUSSIAN, sigma=self.sigma,
                            sampling_rate=self.q, sensitivity=self.sensitivity)


@dataclass(frozen=True)
class SubsampledLaplace:
    """Poisson-subsampled Laplace: scale ``scale``, sampling rate ``q``."""
    scale: float
    q: float
    sensitivity: float = 1.0

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_SUBSAMPLED_LAPLACE, scale=self.scale,
                            sampling_rate=self.q, sensitivity=self.sensitivity)


@dataclass(frozen=True)
class RandomizedResponse:
    """Randomized response answering truthfully with probability ``p`` in (1/2, 1)."""
    p: float

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_RANDOMIZED_RESPONSE, truth_probability=self.p)


@dataclass(frozen=True)
class PureDP:
    """Any epsilon-DP mechanism (nats)."""
    epsilon: float

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_PURE_DP, epsilon=self.epsilon)


@dataclass(frozen=True)
class ApproxDP:
    """Any (epsilon, delta)-DP mechanism."""
    epsilon: float
    delta: float

    def to_proto(self) -> pb.Mechanism:
        return pb.Mechanism(kind=pb.MECHANISM_KIND_APPROX_DP, epsilon=self.epsilon,
                            delta=self.delta)


Mechanism = Union[Gaussian, Laplace, SubsampledGaussian, SubsampledLaplace, RandomizedResponse,
                  PureDP, ApproxDP]
MechanismLike = Union[Mechanism, str]


@dataclass(frozen=True)
class Step:
    """``mechanism`` applied ``count`` times (one entry of an update)."""
    mechanism: MechanismLike
    count: int = 1

    def to_proto(self) -> pb.Step:
        if isinstance(self.mechanism, str):
            if self.count != 1:
                raise ValueError("a SPEC string carries its own count=N; leave Step.count at 1")
            return pb.Step(spec=self.mechanism)
        return pb.Step(mechanism=self.mechanism.to_proto(), count=self.count)


def to_step(item: Union[Step, MechanismLike]) -> Step:
    return item if isinstance(item, Step) else Step(item)
