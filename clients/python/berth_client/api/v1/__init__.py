"""``berth.v1``'s generated stubs (``make protos``; do not edit the ``*_pb2*`` files)."""

from berth_client.api.v1 import cluster_pb2 as cluster_pb2
from berth_client.api.v1 import cluster_pb2_grpc as cluster_pb2_grpc
from berth_client.api.v1 import model_pb2 as model_pb2
from berth_client.api.v1 import model_pb2_grpc as model_pb2_grpc
from berth_client.api.v1 import scheduler_pb2 as scheduler_pb2
from berth_client.api.v1 import scheduler_pb2_grpc as scheduler_pb2_grpc
