"""The ``berth`` command line.

grpc core reads ``GRPC_VERBOSITY`` once, when ``grpc`` is first imported.
Left unset, it logs INFO lines too, such as every failed TLS handshake,
to stderr by itself, before the call fails; the client commands say that
in one line instead (``common.failure``). So the CLI sets grpc's documented
default level, ERROR, unless the user chose one (``GRPC_VERBOSITY=INFO
berth nodes ...`` still shows them). This package is imported before
anything imports grpc on the way to ``berth.cli.main``.
"""

import os as _os
import sys as _sys

if "grpc" not in _sys.modules:
    _os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
