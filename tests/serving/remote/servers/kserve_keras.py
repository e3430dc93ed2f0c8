"""A KServe model server for a .keras model, on loopback (run with the KServe environment's
Python): v1 REST, v2 REST and v2 gRPC on the ports given.

    python kserve_keras.py MODEL.keras NAME HTTP_PORT GRPC_PORT [--fail-every N]
        [--fail-first N] [--stall-every N --stall-s S] [--tf-function] [--also NAME=PATH]

``--tf-function`` calls the model through a ``tf.function`` (as tfperf's worker does) rather
than eagerly; ``--fail-every N`` answers every Nth request with an error, ``--fail-first N``
the first N requests; ``--stall-every N``
holds every Nth request ``--stall-s`` seconds before answering: the faults the load tests
inject. ``--also NAME=PATH`` serves another .keras model beside it (repeatable). v1 requests
are row (``instances``) or columnar (``inputs``); a string input (``BYTES``) is fed to the
model as it came.
"""

import argparse
import asyncio
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("name")
parser.add_argument("http_port", type=int)
parser.add_argument("grpc_port", type=int)
parser.add_argument("--fail-every", type=int, default=0)
parser.add_argument("--fail-first", type=int, default=0)
parser.add_argument("--stall-every", type=int, default=0)
parser.add_argument("--stall-s", type=float, default=0.0)
parser.add_argument("--tf-function", action="store_true", help="call the model in a tf.function")
parser.add_argument("--also", action="append", default=[], help="NAME=PATH of another model")
ARGS = parser.parse_args()
sys.argv = sys.argv[:1]  # kserve reads its own options from the command line when imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer  # noqa: E402

V2 = {"float32": "FP32", "int32": "INT32", "int64": "INT64", "float64": "FP64", "string": "BYTES"}


class KerasModel(Model):
    def __init__(self, name: str, path: str) -> None:
        super().__init__(name)
        self.path = path
        self.count = 0
        self.load()

    def load(self) -> bool:
        self.model = keras.saving.load_model(self.path)
        self.names = [t.name for t in self.model.inputs]
        self.call = self.model
        if ARGS.tf_function:
            import tensorflow as tf

            self.call = tf.function(lambda x: self.model(x, training=False))
        self.ready = True
        return True

    def get_input_types(self):
        return [
            {
                "name": t.name,
                "datatype": V2[t.dtype],
                "shape": [-1 if d is None else d for d in t.shape],
            }
            for t in self.model.inputs
        ]

    def get_output_types(self):
        return [
            {
                "name": "output_0",
                "datatype": "FP32",
                "shape": [-1, *self.model.outputs[0].shape[1:]],
            }
        ]

    def _arrays(self, payload):
        if isinstance(payload, InferRequest):
            return {i.name: i.as_numpy() for i in payload.inputs}
        if isinstance(payload, (bytes, str)):
            payload = json.loads(payload)
        rows = payload.get("instances")
        if rows is None and "inputs" in payload:  # columnar: the arrays as they are
            columns = payload["inputs"]
            if len(self.names) == 1:
                return {self.names[0]: np.asarray(columns)}
            return {n: np.asarray(columns[n]) for n in self.names}
        if rows is None:
            raise ValueError("expected 'instances' or 'inputs'")
        if len(self.names) == 1:
            return {self.names[0]: np.asarray(rows)}
        return {n: np.asarray([row[n] for row in rows]) for n in self.names}

    async def predict(self, payload, headers=None, response_headers=None):
        self.count += 1
        failing = ARGS.fail_every and self.count % ARGS.fail_every == 0
        if failing or self.count <= ARGS.fail_first:
            raise RuntimeError(f"injected failure of request {self.count}")
        if ARGS.stall_every and self.count % ARGS.stall_every == 0:
            await asyncio.sleep(ARGS.stall_s)
        arrays = self._arrays(payload)
        missing = set(self.names) - set(arrays)
        if missing:
            raise ValueError(f"missing inputs {sorted(missing)}")
        pairs = zip(self.names, self.model.inputs, strict=True)
        feed = [arrays[n] if t.dtype == "string" else arrays[n].astype(t.dtype) for n, t in pairs]
        x = feed if len(feed) > 1 else feed[0]
        out = np.asarray(self.call(x) if ARGS.tf_function else self.model(x, training=False))
        if isinstance(payload, InferRequest):
            output = InferOutput(name="output_0", shape=list(out.shape), datatype="FP32", data=out)
            return InferResponse(
                response_id=payload.id or "", model_name=self.name, infer_outputs=[output]
            )
        return {"predictions": out.tolist()}


if __name__ == "__main__":
    models = [KerasModel(ARGS.name, ARGS.model)]
    models += [KerasModel(*also.split("=", 1)) for also in ARGS.also]
    ModelServer(
        http_port=ARGS.http_port,
        grpc_port=ARGS.grpc_port,
        enable_docs_url=False,
        enable_latency_logging=False,
    ).start(models)
