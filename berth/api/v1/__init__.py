"""``berth.v1``'s generated stubs, under the name the server has always used.

The one copy of the generated code lives in the ``berth-client``
distribution (``clients/python/berth_client/api/v1``, written by ``make
protos``), which the ``berth`` distribution depends on: a process that
imports both the server and the client library holds one set of message
classes, and the stubs cannot drift apart.
"""

from berth_client.api.v1 import (
    cluster_pb2 as cluster_pb2,
)
from berth_client.api.v1 import (
    cluster_pb2_grpc as cluster_pb2_grpc,
)
from berth_client.api.v1 import (
    model_pb2 as model_pb2,
)
from berth_client.api.v1 import (
    model_pb2_grpc as model_pb2_grpc,
)
from berth_client.api.v1 import (
    scheduler_pb2 as scheduler_pb2,
)
from berth_client.api.v1 import (
    scheduler_pb2_grpc as scheduler_pb2_grpc,
)

__all__ = ["cluster_pb2", "cluster_pb2_grpc", "model_pb2", "model_pb2_grpc", "scheduler_pb2", "scheduler_pb2_grpc"]
