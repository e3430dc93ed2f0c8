"""A loopback gRPC server with TensorFlow Serving's PredictionService, from
tensorflow-serving-api's own definitions, answering GetModelMetadata and Predict by running a
.keras model per name (TensorFlow Serving itself cannot be installed here).

    python tfserving_grpc.py PORT NAME=MODEL.keras [NAME=MODEL.keras ...]
"""

import sys
from concurrent import futures

import grpc
import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_service_pb2_grpc

PORT = int(sys.argv[1])
MODELS = {
    name: keras.saving.load_model(path)
    for name, path in (arg.split("=", 1) for arg in sys.argv[2:])
}


def _model(request, context):
    model = MODELS.get(request.model_spec.name)
    if model is None:
        context.abort(
            grpc.StatusCode.NOT_FOUND,
            f"Servable not found for request: {request.model_spec.name}",
        )
    return model


class Service(prediction_service_pb2_grpc.PredictionServiceServicer):
    def GetModelMetadata(self, request, context):
        model = _model(request, context)
        signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
        for t in model.inputs:
            info = signature.inputs[t.name]
            info.name = t.name
            info.dtype = tf.as_dtype(t.dtype).as_datatype_enum
            for d in t.shape:
                info.tensor_shape.dim.add(size=-1 if d is None else d)
        sigs = get_model_metadata_pb2.SignatureDefMap()
        sigs.signature_def["serving_default"].CopyFrom(signature)
        answer = get_model_metadata_pb2.GetModelMetadataResponse()
        answer.model_spec.name = request.model_spec.name
        answer.metadata["signature_def"].Pack(sigs)
        return answer

    def Predict(self, request, context):
        model = _model(request, context)
        try:
            feed = [tf.make_ndarray(request.inputs[t.name]) for t in model.inputs]
        except Exception as exc:  # a missing or malformed input
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        out = np.asarray(model(feed if len(feed) > 1 else feed[0], training=False))
        answer = predict_pb2.PredictResponse()
        answer.model_spec.name = request.model_spec.name
        answer.outputs["output_0"].CopyFrom(tf.make_tensor_proto(out))
        return answer


server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Service(), server)
server.add_insecure_port(f"127.0.0.1:{PORT}")
server.start()
print("ready", flush=True)
server.wait_for_termination()
