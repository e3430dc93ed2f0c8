"""A converted model measured the way it is deployed: a process that loads only the artifact and
its runtime (LiteRT, OpenVINO, or an XLA AOT library through its loader), never TensorFlow or a
converter, so that its memory is what a server running that artifact holds.

Contract: ``python -m tfperf.worker.deployed RUNTIME ARTIFACT [--threads N] [--seconds S]
[--inputs JSON] [--hint H] [--streams S]`` imports the runtime, loads ``ARTIFACT``
(``model.tflite``, ``model.xml``, or the ``libmodel.so`` of an XLA AOT folder) as the worker
did (the same thread count, OpenVINO's precision hint from :func:`openvino_properties`), runs
it on zeros -- of the shapes and dtypes ``--inputs`` gives (``[[shape, dtype], ...]``, the
worker's own sample inputs, or a served layout's dynamic batch of them: a converted model may
leave its batch dimension open, and an OpenVINO model whose shapes differ is reshaped to them),
else of those the artifact declares -- at least :data:`MIN_CALLS` calls, about ``S`` seconds.
With ``--hint`` or ``--streams`` (OpenVINO), the model is compiled with them and each call
runs every infer request the compiled model asks for at once, through an ``AsyncInferQueue``,
as a served layout runs it. It prints one line of JSON:

- ``base_rss_bytes``: RSS once the runtime is imported, before the model is loaded;
- ``loaded_rss_bytes``: RSS after the load and the first call;
- ``steady_rss_bytes``: RSS after the calls; ``peak_rss_bytes``: the kernel's high-water mark;
- ``calls``; ``infer_requests``: the requests each call ran at once (OpenVINO with a hint or
  streams: as many as the compiled model asks for; else 1); ``tensorflow_loaded``: whether
  anything in the process imported TensorFlow (the point of the process is that nothing does;
  the parent reports it if it ever happens).

A failure prints one line and exits 3 (:data:`tfperf.core.protocol.EXIT_ERROR`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfperf.core.protocol import EXIT_ERROR
from tfperf.worker.rss import peak_rss_bytes, rss_bytes

MIN_CALLS = 5


def openvino_properties(runtime: str, threads: int | None) -> dict[str, str]:
    """The CPU plugin's properties for ``runtime`` (``openvino-f32`` / ``openvino-bf16``)."""
    properties = {"INFERENCE_PRECISION_HINT": "bf16" if runtime.endswith("bf16") else "f32"}
    if threads:
        properties["INFERENCE_NUM_THREADS"] = str(threads)
    return properties


Loaded = Callable[[], Any]
"""One call of the loaded model on its zero inputs."""


Shapes = list[tuple[list[int], str]] | None
"""The sample inputs' (shape, dtype), in the model's input order (``None``: the artifact's)."""


def _litert(artifact: str, threads: int | None, shapes: Shapes) -> Callable[[], Loaded]:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    def load() -> Loaded:
        interpreter = Interpreter(model_path=artifact, num_threads=threads)
        ins = interpreter.get_input_details()
        for detail, (shape, _) in zip(ins, shapes or []):  # noqa: B905 (Python 3.9)
            if list(detail["shape"]) != list(shape):
                interpreter.resize_tensor_input(detail["index"], list(shape))
        interpreter.allocate_tensors()
        ins = interpreter.get_input_details()
        zeros = [np.zeros(d["shape"], d["dtype"]) for d in ins]
        outs = interpreter.get_output_details()

        def call() -> list[Any]:
            for detail, array in zip(ins, zeros):  # noqa: B905 (Python 3.9)
                interpreter.set_tensor(detail["index"], array)
            interpreter.invoke()
            return [interpreter.get_tensor(d["index"]) for d in outs]

        return call

    return load


def _openvino_model(artifact: str, shapes: Shapes) -> Any:
    """The model read, reshaped to ``shapes`` where its own differ (a dynamic batch)."""
    import openvino as ov

    model = ov.Core().read_model(artifact)
    if shapes:
        wanted = {port: ov.PartialShape(list(shape))
                  for port, (shape, _) in zip(model.inputs, shapes)  # noqa: B905 (Python 3.9)
                  if port.get_partial_shape() != ov.PartialShape(list(shape))}
        if wanted:
            model.reshape(wanted)
    return model


def _openvino(
    artifact: str, threads: int | None, runtime: str, shapes: Shapes,
    serving: dict[str, str] | None = None,
) -> Callable[[], Loaded]:
    import numpy as np
    import openvino as ov

    def load() -> Loaded:
        properties = {**openvino_properties(runtime, threads), **(serving or {})}
        compiled = ov.Core().compile_model(_openvino_model(artifact, shapes), "CPU", properties)
        zeros = [np.zeros(tuple(p.get_shape()), p.get_element_type().to_dtype())
                 for p in compiled.inputs]
        if serving:  # as a layout serves it: every infer request it asks for, at once
            jobs = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            queue = ov.AsyncInferQueue(compiled, jobs)

            def all_at_once() -> list[Any]:
                for _ in range(jobs):
                    queue.start_async(zeros)
                queue.wait_all()
                return [queue[0].get_output_tensor(i).data for i in range(len(compiled.outputs))]

            all_at_once.jobs = jobs  # type: ignore[attr-defined]
            return all_at_once
        request = compiled.create_infer_request()

        def call() -> list[Any]:
            result = request.infer(zeros)
            return [result[o] for o in compiled.outputs]

        return call

    return load


def _xla_aot(artifact: str, threads: int | None) -> Callable[[], Loaded]:
    import numpy as np

    from tfperf.core.aot_loader import AotModel

    folder = Path(artifact).parent

    def load() -> Loaded:
        model = AotModel(folder, threads)
        meta = json.loads((folder / "model.json").read_text())
        zeros = [np.zeros(i["shape"], i["dtype"]) for i in meta["inputs"]]
        return lambda: model(*zeros)

    return load


def loader(
    runtime: str, artifact: str, threads: int | None, shapes: Shapes = None,
    serving: dict[str, str] | None = None,
) -> Callable[[], Loaded]:
    """Import ``runtime``; a function that loads the artifact and returns its call
    (``serving``: OpenVINO's ``PERFORMANCE_HINT`` and ``NUM_STREAMS`` of a served layout)."""
    if runtime.startswith("litert"):
        return _litert(artifact, threads, shapes)
    if runtime.startswith("openvino"):
        return _openvino(artifact, threads, runtime, shapes, serving)
    if runtime == "xla-aot":
        return _xla_aot(artifact, threads)
    raise ValueError(f"no deployed form of the runtime {runtime!r}")


def measure(
    runtime: str, artifact: str, threads: int | None, seconds: float, shapes: Shapes = None,
    serving: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The record of the module docstring."""
    load = loader(runtime, artifact, threads, shapes, serving)
    base = rss_bytes()
    call = load()
    call()
    loaded = rss_bytes()
    calls, deadline = 0, time.perf_counter() + seconds
    while calls < MIN_CALLS or time.perf_counter() < deadline:
        call()
        calls += 1
    steady = rss_bytes()
    return {
        "base_rss_bytes": base,
        "loaded_rss_bytes": loaded,
        "steady_rss_bytes": steady,
        # the kernel's two counters round differently: the peak is never below a reading
        "peak_rss_bytes": max(peak_rss_bytes(), loaded, steady),
        "calls": calls,
        "infer_requests": getattr(call, "jobs", 1),
        "tensorflow_loaded": "tensorflow" in sys.modules,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfperf.worker.deployed")
    parser.add_argument("runtime")
    parser.add_argument("artifact")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--inputs", type=json.loads, default=None)
    parser.add_argument("--hint", default=None)
    parser.add_argument("--streams", type=int, default=None)
    args = parser.parse_args(argv)
    serving = {k: str(v) for k, v in (("PERFORMANCE_HINT", args.hint),
                                      ("NUM_STREAMS", args.streams)) if v}
    try:
        record = measure(args.runtime, args.artifact, args.threads, args.seconds, args.inputs,
                         serving or None)
    except Exception as exc:  # one line for the parent, whatever the runtime raised
        print(f"the deployed {args.runtime} model did not run: {type(exc).__name__}: {exc}"
              .replace("\n", " ")[:400], flush=True)
        return EXIT_ERROR
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
