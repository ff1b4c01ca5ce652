"""The generated protobuf and gRPC stubs of Berth's contract (``protos/``)."""

from berth_client.api import v1 as v1
