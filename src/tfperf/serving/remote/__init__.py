"""A server the user already runs as the server under test (``tfperf bench --url``).

Modules: ``target`` (the URL, the protocol, guessed or given), ``access`` (the headers a server
asks for and the CA its TLS certificate is trusted by), ``tensors`` (the model's inputs
and the values sent), ``wire`` (what a protocol's client does), ``rest`` (TensorFlow Serving's
REST API and the Open Inference Protocol v2 over HTTP, with httpx), ``grpc_wire`` (v2 over gRPC
and TensorFlow Serving's PredictionService, with grpcio's asyncio API), ``client`` (the
generator's :class:`~tfperf.serving.generator.Server` over the network) and ``run`` (prepare,
measure with the same levels and SLO search as a local layout, record). Only the host and port
of the URL are ever contacted. Nothing here imports TensorFlow.
"""

from tfperf.serving.remote.run import Prepared, prepare, run_remote
from tfperf.serving.remote.target import PROTOCOLS, RemoteTarget, parse_target

__all__ = ["PROTOCOLS", "Prepared", "RemoteTarget", "parse_target", "prepare", "run_remote"]
